//! The registration: what a protocol tells every command about itself.

use super::options::Problem;
use super::plan::Plan;
use super::point::PointSpec;

/// A deliberately broken variant of a protocol: proof that the checkers catch real bugs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mutant {
    /// CLI name (`--mutant release-before-flush`).
    pub name: &'static str,
    /// One line on what it breaks.
    pub breaks: &'static str,
}

/// One protocol (or benchmark) as every command consumes it. Implementations are plain values
/// registered once at the CLI edge; `sim`, the fuzzer and the hardware runner only see this.
pub trait Protocol: Send + Sync + 'static {
    type Plan: Plan;

    /// The scenario `protocol` names this definition answers to.
    fn names(&self) -> &'static [&'static str];

    /// One line for `--help`-style listings.
    fn about(&self) -> &'static str;

    /// Every mutant (without `"none"`, the correct protocol).
    fn mutants(&self) -> &'static [Mutant] {
        &[]
    }

    /// Validate `point` and resolve it into a runnable plan. Every problem carries its field
    /// path (`workload.read_ratio`, `protocol_options.lease_gamma`).
    fn plan(&self, point: &PointSpec) -> Result<Self::Plan, Vec<Problem>>;
}

/// A protocol's mutant table from one declaration: `LIST` (for `--list-mutants`) and
/// `named(name)` (the variant a CLI name selects; `"none"` is `Variant::None`, the correct
/// protocol). Used in each protocol's `mutants.rs`:
///
/// ```ignore
/// dmsim_protocols::mutant_table!(Mutant {
///     "grant-without-invalidate" => GrantWithoutInvalidate: "a write miss is granted …",
/// });
/// ```
#[macro_export]
macro_rules! mutant_table {
    ($variant:ident { $($name:literal => $v:ident: $breaks:literal,)* }) => {
        /// Every mutant: CLI name and what it breaks.
        pub const LIST: &[$crate::harness::Mutant] =
            &[$($crate::harness::Mutant { name: $name, breaks: $breaks }),*];

        /// The mutant named `name` (`"none"` is the correct protocol).
        pub fn named(name: &str) -> Option<$variant> {
            match name {
                "none" => Some($variant::None),
                $($name => Some($variant::$v),)*
                _ => None,
            }
        }
    };
}
