"""Every world rule, once: pure functions that decide; the flows ask them, backends do the I/O.

Private to ``worlds``. Each module is one concept: ``requests`` (checks of
what a caller sends), ``runs`` (a new run and how events change it),
``claims`` (who holds a unique attribute and at which generation),
``cancel`` (what cancelling a run does), ``commits`` (what a commit does
with its lease), ``slots`` (limited pairs: admission and promotion), ``liveness`` (when a
registered worker is dead and whose items may be taken) and
``work`` (where a new work item goes and whether its enqueuer leases it). The
flows of ``worlds._flows`` read the rows a rule needs, call the rule and write
its outcome, in one order for every backend (backends never import this
package); ``worlds.semantics`` re-exports the parts a third-party world may use.
"""
