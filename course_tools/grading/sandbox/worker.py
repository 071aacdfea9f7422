"""The submission's side of the grade command: ``python -m course_tools.grading.sandbox.worker SPEC``.

Started by :mod:`course_tools.grading.sandbox` inside the sandbox (an unprivileged process
without network, on a read-only copy of the library whose ``checks`` hold no checker, reference
or probe). It first caps its own resources (``SPEC``'s limits become hard ``setrlimit`` limits
before any student code runs, so nothing the student writes can raise them), then answers the
grader's requests on file descriptors 3 (in) and 4 (out), in the plain-data messages of
:mod:`course_tools.grading.sandbox.wire`:

* ``run``: execute the submission's next code cells (IPython syntax turned into Python);
* ``lookup`` a name the course's test cell uses, ``call`` an object with arguments,
  ``getattr``, ``len``, ``iter``/``next``, ``signature``: only data comes back, anything else as
  a handle.

Nothing here is trusted: the student's code runs in this process and may rewrite all of it. The
grader treats every answer as the student's answer (plain data, checked by the course's checker
in the grader's own process), so rewriting this module gains nothing.
"""

from __future__ import annotations

import builtins
import inspect
import json
import os
import resource
import sys
import traceback

_LIMITS = {  # SPEC key -> resource
    "memory_bytes": resource.RLIMIT_AS,
    "processes": resource.RLIMIT_NPROC,
    "file_bytes": resource.RLIMIT_FSIZE,
    "cpu_seconds": resource.RLIMIT_CPU,
    "open_files": resource.RLIMIT_NOFILE,
}
PRINT_EXCERPT = 640  # characters of what one call printed that go back to the grader


def _apply_limits(limits: dict) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, which in _LIMITS.items():
        if limits.get(key):
            value = int(limits[key])
            resource.setrlimit(which, (value, value))


def _python_source(source: str) -> str:
    """``source`` as Python: IPython's syntax (``%magic``, ``!cmd``, ``x?``) transformed. A cell
    that already compiles as Python is returned as it is (nothing to transform, and the worker
    does not import IPython for it)."""
    try:
        compile(source, "<cell>", "exec")
        return source
    except (SyntaxError, ValueError):
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # no IPython: plain Python only
        return source
    return TransformerManager().transform_cell(source)


def _error_info(error: BaseException) -> dict:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if frame.filename.startswith("<cell")]
    where = frames[-1] if frames else None
    return {"type": type(error).__name__, "message": str(error)[:2000],
            "not_implemented": isinstance(error, NotImplementedError),
            "line": where.lineno if where else 0, "name": where.name if where else "?"}


class Worker:
    def __init__(self, cells: list[str]) -> None:
        from course_tools.grading.sandbox import wire

        self.wire = wire
        self.cells = cells
        self.done = 0
        self.namespace: dict = {"__name__": "__main__", "__builtins__": builtins,
                                "get_ipython": lambda: None}
        self.objects: dict[int, object] = {}
        from lectures_lib.checks.grader import CappedOutput  # (after the limits: imports torch)

        self.printed = CappedOutput(PRINT_EXCERPT)  # what the student's code prints

    def handle_of(self, value) -> int:
        number = len(self.objects) + 1
        self.objects[number] = value
        return number

    def object_of(self, number: int):
        return self.objects[number]

    def reply_value(self, value) -> dict:
        return {"ok": self.wire.encode(value, self.handle_of)}

    def op_run(self, message: dict) -> dict:
        errors = []
        upto = min(int(message["upto"]), len(self.cells))
        while self.done < upto:
            index = self.done
            self.done += 1
            try:
                code = compile(_python_source(self.cells[index]), f"<cell {index}>", "exec")
                exec(code, self.namespace)  # noqa: S102 - the submission, in its sandbox
            except BaseException as error:  # SystemExit, KeyboardInterrupt: the cell failed
                errors.append([index, f"{type(error).__name__}: {str(error)[:300]}"])
        self.printed.take()
        return {"ok": ("v", json.dumps(errors))}

    def op_lookup(self, message: dict) -> dict:
        name = message["name"]
        if name not in self.namespace:
            return {"missing": True}
        return self.reply_value(self.namespace[name])  # a module too: a handle, never its name

    def op_call(self, message: dict) -> dict:
        target = self.object_of(message["handle"])
        args = self.wire.decode(message["args"], self.object_of)
        kwargs = self.wire.decode(message["kwargs"], self.object_of)
        try:
            value = target(*args, **kwargs)
        except BaseException as error:
            return {"raised": _error_info(error), "printed": self.printed.take()}
        return {**self.reply_value(value), "printed": self.printed.take(),
                "after": self.wire.encode([args, kwargs], self.handle_of)}

    def op_getattr(self, message: dict) -> dict:
        try:
            value = getattr(self.object_of(message["handle"]), message["name"])
        except AttributeError:
            return {"missing": True}
        return self.reply_value(value)

    def op_len(self, message: dict) -> dict:
        return self.reply_value(len(self.object_of(message["handle"])))

    def op_iter(self, message: dict) -> dict:
        return self.reply_value(iter(self.object_of(message["handle"])))

    def op_next(self, message: dict) -> dict:
        try:
            return self.reply_value(next(self.object_of(message["handle"])))
        except StopIteration:
            return {"missing": True}

    def op_signature(self, message: dict) -> dict:
        try:
            parameters = inspect.signature(self.object_of(message["handle"])).parameters.values()
        except (TypeError, ValueError):
            return {"missing": True}
        return {"ok": ("v", json.dumps([[p.name, int(p.kind), p.default is not p.empty]
                                        for p in parameters]))}

    def serve(self) -> None:
        while True:
            try:
                message = self.wire.read_frame(3)
            except EOFError:
                return
            sys.stdout = sys.stderr = self.printed
            try:
                reply = getattr(self, "op_" + str(message.get("op")))(message)
            except BaseException as error:  # the request could not be served: say why
                reply = {"raised": _error_info(error), "printed": self.printed.take()}
            finally:
                sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            try:
                self.wire.write_frame(4, reply)
            except Exception as error:  # e.g. an answer that is not data, or too large
                self.wire.write_frame(4, {"raised": _error_info(error), "printed": ""})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as file:
        spec = json.load(file)
    _apply_limits(spec.get("limits", {}))
    os.environ.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    import torch

    torch.set_num_threads(1)
    if spec.get("task_key") is not None:  # the trained exercises' data follow the graded
        from lectures_lib.checks.grader import set_task_variant  # variant (not in the

        set_task_variant(spec["task_key"])  # environment: shell commands do not see it)
    Worker(list(spec["cells"])).serve()
    os._exit(0)  # the grader hung up: end now (no exit handlers of the student's code)


if __name__ == "__main__":
    raise SystemExit(main())
