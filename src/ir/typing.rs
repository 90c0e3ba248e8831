//! The typing rules of IR types that both the checker (`types::check`, which elaborates them
//! into every `Expr::ty`) and the validator (`ir::validate`, which checks a loaded program
//! against them) apply: assignability, the join of two types, and the unification of an
//! intrinsic signature's type variables with argument types. One copy, so the two can never
//! disagree about what a well-typed program is.

use super::Type;
use std::collections::BTreeMap;

/// The types bound to a signature's type variables (`T`, `U`) while its arguments are matched.
pub type Bindings = BTreeMap<String, Type>;

/// Can a value of type `from` be used where `to` is expected?
pub fn assignable(from: &Type, to: &Type) -> bool {
    match (from, to) {
        (Type::Any, _) | (_, Type::Any) => true,
        (a, b) if a == b => true,
        (Type::Null, Type::Optional(_)) => true,
        (Type::Optional(a), Type::Optional(b)) => assignable(a, b),
        (a, Type::Optional(b)) => assignable(a, b),
        (Type::List(a), Type::List(b)) => assignable(a, b),
        (Type::Record(a), Type::Record(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|((na, ta), (nb, tb))| na == nb && assignable(ta, tb))
        }
        _ => false,
    }
}

/// The least type both can be assigned to (for `if` branches and list elements).
pub fn join(a: &Type, b: &Type) -> Option<Type> {
    if assignable(a, b) && !matches!(b, Type::Any) {
        return Some(b.clone());
    }
    if assignable(b, a) {
        return Some(a.clone());
    }
    match (a, b) {
        (Type::Null, t) | (t, Type::Null) => Some(Type::optional(t.clone())),
        (Type::Optional(x), y) | (y, Type::Optional(x)) => join(x, y).map(Type::optional),
        (Type::List(x), Type::List(y)) => join(x, y).map(|t| Type::List(Box::new(t))),
        (Type::Record(x), Type::Record(y)) if x.len() == y.len() => {
            let mut fields = Vec::with_capacity(x.len());
            for ((nx, tx), (ny, ty)) in x.iter().zip(y) {
                if nx != ny {
                    return None;
                }
                fields.push((nx.clone(), join(tx, ty)?));
            }
            Some(Type::Record(fields))
        }
        _ => None,
    }
}

/// Match an argument of type `arg` with a parameter of type `param` (which may mention type
/// variables), binding or widening the variables in `b`.
pub fn unify(param: &Type, arg: &Type, b: &mut Bindings) -> bool {
    match (param, arg) {
        (_, Type::Any) => true,
        (Type::Var(v), a) => match b.get(v).cloned() {
            Some(bound) => match join(&bound, a) {
                Some(j) => {
                    b.insert(v.clone(), j);
                    true
                }
                None => false,
            },
            None => {
                b.insert(v.clone(), a.clone());
                true
            }
        },
        (Type::List(p), Type::List(a)) => unify(p, a, b),
        (Type::Optional(p), Type::Optional(a)) => unify(p, a, b),
        (Type::Optional(_), Type::Null) => true,
        (Type::Optional(p), a) => unify(p, a, b),
        (Type::Record(p), Type::Record(a)) => {
            p.len() == a.len() && p.iter().zip(a).all(|((pn, pt), (an, at))| pn == an && unify(pt, at, b))
        }
        (p, a) => assignable(a, p),
    }
}

/// `t` with its type variables replaced by their bindings (an unbound variable is `Any`).
pub fn subst(t: &Type, b: &Bindings) -> Type {
    match t {
        Type::Var(v) => b.get(v).cloned().unwrap_or(Type::Any),
        Type::List(i) => Type::List(Box::new(subst(i, b))),
        Type::Optional(i) => Type::optional(subst(i, b)),
        Type::Record(f) => Type::Record(f.iter().map(|(n, t)| (n.clone(), subst(t, b))).collect()),
        other => other.clone(),
    }
}

/// Whether two types agree wherever both are known (`Any` agrees with everything): the types
/// a signature gives for a call when its variables are bound in another order.
pub fn consistent(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::Any, _) | (_, Type::Any) => true,
        (Type::List(x), Type::List(y)) | (Type::Optional(x), Type::Optional(y)) => consistent(x, y),
        (Type::Record(x), Type::Record(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((nx, tx), (ny, ty))| nx == ny && consistent(tx, ty))
        }
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_widens_to_optional_and_keeps_known_types() {
        let opt_text = Type::optional(Type::Text);
        assert_eq!(join(&Type::Null, &Type::Text), Some(opt_text.clone()));
        assert_eq!(join(&Type::Text, &opt_text), Some(opt_text));
        assert_eq!(join(&Type::Number, &Type::Text), None);
        let any_list = Type::List(Box::new(Type::Any));
        let num_list = Type::List(Box::new(Type::Number));
        assert_eq!(join(&any_list, &num_list), Some(num_list.clone()));
        assert!(consistent(&any_list, &num_list));
        assert!(!consistent(&num_list, &Type::List(Box::new(Type::Text))));
    }

    #[test]
    fn unify_binds_variables_and_subst_reads_them() {
        let mut b = Bindings::new();
        let list_t = Type::List(Box::new(Type::Var("T".into())));
        assert!(unify(&list_t, &Type::List(Box::new(Type::Number)), &mut b));
        assert_eq!(subst(&Type::optional(Type::Var("T".into())), &b), Type::optional(Type::Number));
        assert!(!unify(&Type::Var("T".into()), &Type::Text, &mut b));
        assert_eq!(subst(&Type::Var("U".into()), &b), Type::Any);
    }
}
