"""Each write operation of a world, written once: the flows over the rows port.

Private to ``worlds``. A flow is the order in which an operation reads rows,
asks the rules of ``worlds._rules`` and writes the outcome, for every backend:
``create`` (``create_run``), ``commit`` (``commit``, ``commit_many``),
``cancel``, ``hooks`` (``resume_hook``, ``start_or_resume_hook``), ``reopen``
(``reopen_run``, ``fork_run``), ``prune``, ``streams`` (``append_stream``) and
``schedules`` (``create_schedule``, ``update_schedule``), with what they share:
``closing`` (storing a run, and what closing it does), ``settle`` (claims and
hook tokens a commit takes), ``slots`` (admission, ``hold()``, promotion),
``work`` (enqueueing); ``release`` is ``release_claim``. A flow talks to
storage only through ``rows.Rows``,
which each backend implements over its transaction; ``stepper.run_sync`` runs
a flow over rows that never wait (SQLite, memory), PostgreSQL awaits it. Only
this package calls ``worlds._rules``; the backends call flows
(``rfcs/0019-flows-and-rows.md``).
"""
