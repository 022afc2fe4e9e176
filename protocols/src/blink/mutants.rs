//! The tree's mutants: planted bugs the checkers must catch
//! (`dmsim fuzz scenarios/selcc/blink-fuzz-small.json --mutant <name>`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    SplitWithoutRightLink,
    SiblingWrittenAfterPublish,
    MissingHighKeyCheck,
    SplitKeepsUpperHalf,
    ParentSeparatorOffByOne,
    InsertUnsorted,
    RootNotInstalled,
    ParentWithoutMoveRight,
    InsertIntoWrongHalf,
    StaleWriteBack,
    SplitWithoutRecheck,
}

crate::mutant_table!(Mutant {
    "split-without-right-link" => SplitWithoutRightLink:
        "a split does not link the old node to its new right sibling (the sibling inherits nothing)",
    "sibling-written-after-publish" => SiblingWrittenAfterPublish:
        "a split releases the old node (right link published) before the new sibling's contents are written",
    "missing-high-key-check" => MissingHighKeyCheck:
        "traversal never compares the key with a node's high fence, so it never moves right after a concurrent split",
    "split-keeps-upper-half" => SplitKeepsUpperHalf:
        "a split copies the upper half to the sibling but leaves the old node's count unchanged",
    "parent-separator-off-by-one" => ParentSeparatorOffByOne:
        "the separator posted to the parent is the sibling's low fence plus one",
    "insert-unsorted" => InsertUnsorted:
        "a leaf insert appends the new entry instead of keeping the entries sorted",
    "root-not-installed" => RootNotInstalled:
        "a root split builds the new root but never stores it in the meta page",
    "parent-without-move-right" => ParentWithoutMoveRight:
        "posting a separator locks the remembered parent and inserts there without checking its high fence",
    "insert-into-wrong-half" => InsertIntoWrongHalf:
        "the key that caused a split always goes into the old (left) node",
    "stale-write-back" => StaleWriteBack:
        "a leaf is read under S, released, then X-locked and its stale image written back (latch dropped between read and write-back)",
    "split-without-recheck" => SplitWithoutRecheck:
        "over SEL (one latch at a time) a split publishes its halves without checking that the old node is unchanged since it was read",
});
