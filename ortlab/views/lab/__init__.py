"""The Lab, one feature folder: ``lab`` the widget (controls into a run, results into tabs),
``state`` what it has measured (one typed record), ``host`` the Lab as its jobs see it,
``tabjobs`` and ``limits`` the jobs its buttons start, ``controls``, ``jobs``, ``status``,
``outputs``, ``snapshot``, ``warmup``, ``pickers``, ``kernelnodes``, ``overview`` and
``history`` the rest of it. Imported on first use of ``ortlab.Lab``.
"""
