"""The doctor: observe a session, build candidate fixes, time them interleaved, and turn facts
into findings.

Lives here: ``doctor`` (the verb and DoctorResult), ``search`` (the budgeted screen / prune /
combine search), ``generation`` (an LLM decoder's candidates measured in generation),
``rules``, ``rules_decoder`` and friends (pure functions from facts to findings), ``best`` (the
best verified configuration).

May import: ``ortlab.analysis``, ``ortlab.engine``, ``ortlab.core``. A new rule is a function in
``rules`` (tested on hand-built Facts) added to ``RULES``.
"""
