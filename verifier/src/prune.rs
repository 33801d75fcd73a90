//! State equivalence (`states_equal`, `regsafe`, `stacksafe`, `refsafe`): when a state reached
//! at a prune point is covered by one already explored, the path stops there.
