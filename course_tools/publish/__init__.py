"""The course as it is published: student versions and nbgrader's notebooks (:mod:`.exercises`,
``release``/``source``/``make student``), the course written into any folder (:mod:`.copy`),
the notebooks re-executed in place (:mod:`.notebooks`, ``make notebooks``) and the static site
(:mod:`.site`, ``make site``)."""
