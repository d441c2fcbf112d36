"""The doctor: observe a session, build candidate fixes, time them interleaved, and turn facts
into findings.

Lives here: ``doctor`` (the verb and DoctorResult), ``search`` (the budgeted screen / prune /
combine search), ``rules`` (pure functions from facts to findings), ``best`` (the best verified
configuration).

May import: ``ortlab.analysis``, ``ortlab.engine``, ``ortlab.core``. A new rule is a function in
``rules`` (tested on hand-built Facts) added to ``RULES``.
"""
