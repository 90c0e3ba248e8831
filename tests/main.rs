//! The one integration test binary (few binaries keep link times low): every test module of
//! `tests/` is a `mod` here.
mod props;
