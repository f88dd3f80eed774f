//! xtask
fn main(){}
