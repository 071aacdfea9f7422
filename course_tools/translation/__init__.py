"""The Chinese editions from the English notebooks and ``translations/``: :mod:`.translate`
(generate, status, skeleton), the Traditional Chinese conversion (:mod:`.zh_hant`), the parts a
translation keeps verbatim (:mod:`.verbatim`) and the Chinese notebooks' own stored runs
(:mod:`.own_runs`)."""
