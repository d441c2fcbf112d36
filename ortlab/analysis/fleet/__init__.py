"""Measurements on many models and machines (issue 63): a spec of models, verbs and configs
(:mod:`.spec`), run here into one record per item (:mod:`.runner`), and the records of many
runs merged into one comparison (:mod:`.merge`)."""
