//! Intrinsic signatures: parsed from the rubric-syntax strings in `stdlib` and converted to IR
//! types on first use, once per process and intrinsic; also the conversion of written types
//! (`ast::TypeExpr`) to `ir::Type`.

use crate::ir::{Const, Type};
use crate::stdlib;
use crate::syntax::ast::{ExprKind, TypeExpr, TypeExprKind, UnOp};
use crate::syntax::parse_type_sig;
use std::sync::OnceLock;

#[derive(Debug, Clone)]
pub struct IntrinsicSig {
    pub params: Vec<(String, Type, Option<Const>)>,
    pub ret: Type,
}

/// One slot per intrinsic of `stdlib::intrinsics()`, each filled on first use: a program pays
/// for parsing the signatures of the intrinsics it calls, not of the whole catalogue.
fn slots<T>(table: &'static OnceLock<Box<[OnceLock<T>]>>) -> &'static [OnceLock<T>] {
    table.get_or_init(|| stdlib::intrinsics().iter().map(|_| OnceLock::new()).collect())
}

/// The signature of intrinsic number `index` in `stdlib::intrinsics()`, parsed on its first use.
/// `None` for a signature that does not parse: `sig_table_parses` checks them all.
pub fn intrinsic_sig(index: usize) -> Option<&'static IntrinsicSig> {
    static SIGS: OnceLock<Box<[OnceLock<Option<IntrinsicSig>>]>> = OnceLock::new();
    let intrinsic = stdlib::intrinsics().get(index)?;
    slots(&SIGS).get(index)?.get_or_init(|| parse_sig(intrinsic.sig).ok()).as_ref()
}

pub fn parse_sig(src: &str) -> Result<IntrinsicSig, String> {
    let (params, ret) = parse_type_sig(src)?;
    let mut out = Vec::new();
    for p in params {
        let ty = lower_type(&p.ty, true).map_err(|(_, m)| m)?;
        let default = match p.default.as_ref().map(|d| &d.kind) {
            None => None,
            Some(ExprKind::Null) => Some(Const::Null),
            Some(ExprKind::Bool(b)) => Some(Const::Bool(*b)),
            Some(ExprKind::Number(n)) => Some(Const::Number(*n)),
            Some(ExprKind::Unary(UnOp::Neg, e)) => match e.kind {
                ExprKind::Number(n) => Some(Const::Number(-n)),
                _ => return Err(format!("default of `{}` is not a literal", p.name.text)),
            },
            Some(ExprKind::Str(s)) => Some(Const::Text(s.as_str().into())),
            Some(_) => return Err(format!("default of `{}` is not a literal", p.name.text)),
        };
        out.push((p.name.text, ty, default));
    }
    Ok(IntrinsicSig { params: out, ret: lower_type(&ret, true).map_err(|(_, m)| m)? })
}

/// The stdlib catalogue as the IR validator (`ir::validate`) sees it: each intrinsic's
/// parameter and result types, by name and overload rank, each converted on first use.
#[derive(Debug)]
pub struct Catalogue;

/// The catalogue every loaded program is validated against.
pub static CATALOGUE: Catalogue = Catalogue;

/// An intrinsic's parameter types and result type.
type Signature = (Vec<Type>, Type);

impl crate::ir::validate::Intrinsics for Catalogue {
    fn signature(&self, name: &str, overload: u32) -> Option<(&[Type], &Type)> {
        static TYPES: OnceLock<Box<[OnceLock<Option<Signature>>]>> = OnceLock::new();
        let (index, _) = stdlib::lookup(name).nth(overload as usize)?;
        let types = slots(&TYPES).get(index)?.get_or_init(|| {
            intrinsic_sig(index).map(|s| (s.params.iter().map(|(_, t, _)| t.clone()).collect(), s.ret.clone()))
        });
        types.as_ref().map(|(params, ret)| (params.as_slice(), ret))
    }
}

/// Built-in type names.
pub const TYPE_NAMES: &[&str] =
    &["Text", "Number", "Bool", "Json", "Conversation", "Message", "Image", "Trajectory", "Step", "ToolCall"];

/// Convert a written type. `generic` admits the type variable `T` (signatures only).
pub fn lower_type(t: &TypeExpr, generic: bool) -> Result<Type, (crate::source::Span, String)> {
    Ok(match &t.kind {
        TypeExprKind::Named(n) => match n.text.as_str() {
            "Text" => Type::Text,
            "Number" => Type::Number,
            "Bool" => Type::Bool,
            "Json" => Type::Json,
            "Conversation" => Type::conversation(),
            "Message" => Type::message(),
            "Trajectory" => Type::trajectory(),
            "Step" => Type::step(),
            "ToolCall" => Type::tool_call(),
            "Image" => Type::image(),
            "T" | "U" if generic => Type::Var(n.text.clone()),
            other => return Err((n.span, format!("unknown type `{other}`"))),
        },
        TypeExprKind::List(inner) => Type::List(Box::new(lower_type(inner, generic)?)),
        TypeExprKind::Optional(inner) => Type::optional(lower_type(inner, generic)?),
        TypeExprKind::Record(fields) => {
            let mut out: Vec<(String, Type)> = Vec::new();
            for f in fields {
                if out.iter().any(|(n, _)| *n == f.name.text) {
                    return Err((f.name.span, format!("field `{}` is declared twice", f.name.text)));
                }
                out.push((f.name.text.clone(), lower_type(&f.ty, generic)?));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Type::Record(out)
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn sig_table_parses() {
        for (i, intr) in crate::stdlib::intrinsics().iter().enumerate() {
            assert!(super::intrinsic_sig(i).is_some(), "signature of `{}` does not parse: {}", intr.name, intr.sig);
        }
    }
}
