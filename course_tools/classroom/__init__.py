"""The course in a classroom: JupyterLab on the course (:mod:`.lab`, ``make lab``) and a
JupyterHub for a class (:mod:`.hub`, ``make hub``)."""
