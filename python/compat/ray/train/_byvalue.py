"""Pickle a training loop by value, as Ray's cloudpickle does, with the standard library only.

A driver's fit() sends ``train_loop_per_worker`` to the gang's workers in a file; the
workers never import the driver's script, so its top level (everything before and after
fit()) runs once, in the driver, as in Ray. What the loop needs travels with it:

- functions (lambdas, nested functions, closures, decorated ones) and classes that cannot
  be imported by name (defined in ``__main__``, the script, or inside a function) go by
  value: a function as its code (``marshal``), its defaults, its closure's cells and the
  globals its code uses (its global instructions, and those of the code nested in it, as
  cloudpickle finds them); a class
  as its metaclass, name and bases, then its attributes (methods by value too);
- modules, and functions and classes that their module holds under their name, go by
  reference: the worker imports them (the script's folder and the working folder are on
  its path, for the loop's own modules);
- everything else is pickled as pickle always does.

Cycles (a function that calls itself, functions that call each other, a method whose
``super()`` names its class) are pickle's memo's: an object is recorded before its state,
and the functions of one module share one globals dict in the worker, as in cloudpickle.

What cannot be sent is refused by dumps (NotSendable, a TypeError; find_unsendable says
where it is used): what pickle refuses (an open file, a lock, a socket, a generator), a
module that cannot be imported by name (the script itself, one loaded from a file path),
and an object whose ``__reduce__`` returns a name of the script (pickle would send the
name, which the workers' ``__main__`` lacks). A module that the worker cannot import
fails there, saying so.

The rules are cloudpickle 3's (Ray 2.x vendors it as ``ray.cloudpickle``): "by value"
exactly when ``module.qualname`` does not find the object. Code objects tie the bytes
to the Python that wrote them: ``loads`` refuses another Python with an error saying so.
"""

from __future__ import annotations

import builtins
import dataclasses
import dis
import enum
import functools
import importlib
import io
import marshal
import pickle
import sys
import types
import typing
from typing import Any

__all__ = ["NotSendable", "WrongPython", "dumps", "find_unsendable", "loads", "python_tag"]


class NotSendable(TypeError):
    """Raised by dumps when a part of the object cannot be pickled; says which part."""


class WrongPython(RuntimeError):
    """Raised by loads when the bytes were written by another Python version."""


def python_tag() -> str:
    """Return the tag of this Python's bytecode (``cpython-311``): code objects from one
    Python load only in a Python with the same tag."""
    return sys.implementation.cache_tag or f"{sys.implementation.name}-{sys.version_info[0]}{sys.version_info[1]}"


def dumps(obj: Any) -> bytes:
    """Return obj pickled, with what only the caller's process defines by value.

    Raises NotSendable (a TypeError) naming the part that cannot be pickled (use
    describe_failure for where it is used)."""
    buf = io.BytesIO()
    buf.write(python_tag().encode() + b"\n")
    try:
        _Pickler(buf).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError, ValueError, RecursionError) as e:
        raise NotSendable(f"{type(e).__name__}: {e}") from e
    return buf.getvalue()


def loads(data: bytes) -> Any:
    """Return the object dumps pickled; raise WrongPython if another Python wrote it."""
    tag, _, body = data.partition(b"\n")
    if tag.decode(errors="replace") != python_tag():
        raise WrongPython(
            f"the driver pickled train_loop_per_worker with Python {tag.decode(errors='replace')}, but this "
            f"worker runs {python_tag()} ({sys.executable}); code objects load only in the Python that wrote "
            "them: run the workers with the driver's Python"
        )
    return pickle.loads(body)


# --- reconstruction in the worker (pickled by reference) ---------------------------------


def _load_code(tag: str, data: bytes) -> types.CodeType:
    """Return the code object marshal wrote in the Python of the tag."""
    if tag != python_tag():
        raise WrongPython(f"code written by Python {tag} cannot run in {python_tag()}")
    return marshal.loads(data)


def _make_function(code: types.CodeType, globals_: dict[str, Any], name: str,
                   closure: tuple[Any, ...] | None) -> types.FunctionType:
    """Return a function of code whose globals are globals_ (filled by _set_function_state)."""
    globals_.setdefault("__builtins__", builtins.__dict__)
    return types.FunctionType(code, globals_, name, None, closure)


def _set_function_state(fn: types.FunctionType, state: dict[str, Any]) -> None:
    """Give fn its globals, defaults and attributes."""
    fn.__globals__.update(state["globals"])
    fn.__defaults__ = state["defaults"]
    fn.__kwdefaults__ = state["kwdefaults"]
    fn.__qualname__ = state["qualname"]
    fn.__module__ = state["module"]
    fn.__doc__ = state["doc"]
    fn.__annotations__ = state["annotations"]
    fn.__dict__.update(state["dict"])


def _make_cell() -> types.CellType:
    """Return an empty cell (filled by _set_cell_state)."""
    return types.CellType()


def _set_cell_state(cell: types.CellType, state: tuple[Any, ...]) -> None:
    """Fill the cell, unless it was empty (state is ())."""
    if state:
        cell.cell_contents = state[0]


def _make_class(meta: type, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> type:
    """Return an empty class (its attributes come in _set_class_state)."""
    return types.new_class(name, bases, {"metaclass": meta}, lambda ns: ns.update(namespace))


def _make_enum(meta: type, name: str, bases: tuple[type, ...], members: dict[str, Any],
               namespace: dict[str, Any]) -> type:
    """Return an Enum class with its members (its methods come in _set_class_state)."""
    body = meta.__prepare__(name, bases)
    for key, value in members.items():
        body[key] = value
    for key, value in namespace.items():
        body[key] = value
    return meta(name, bases, body)


def _set_class_state(cls: type, attrs: dict[str, Any]) -> None:
    """Give cls its attributes."""
    for key, value in attrs.items():
        setattr(cls, key, value)


def _lru_cache(fn: Any, parameters: dict[str, Any]) -> Any:
    """Return fn wrapped in functools.lru_cache as it was (an empty cache)."""
    return functools.lru_cache(maxsize=parameters["maxsize"], typed=parameters["typed"])(fn)


def _make_typevar(name: str, bound: Any, constraints: tuple[Any, ...], covariant: bool,
                  contravariant: bool) -> Any:
    """Return a TypeVar as the script defined it."""
    return typing.TypeVar(name, *constraints, bound=bound, covariant=covariant, contravariant=contravariant)


def _importable_typevar(tv: Any) -> bool:
    """Whether the TypeVar is found by its name in its module (other than __main__)."""
    module = getattr(tv, "__module__", None)
    return module != "__main__" and getattr(sys.modules.get(module or ""), tv.__name__, None) is tv


def _import(name: str) -> types.ModuleType:
    """Import the module name, saying that the loop uses it when it cannot be found."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(
            f"ray.train: train_loop_per_worker uses the module {name!r}, which this worker cannot import "
            f"({e}); the workers import modules by name, with the script's folder, the driver's sys.path and "
            "the working folder at the end of sys.path: install it, or keep it beside the script"
        ) from e


# --- the pickler -------------------------------------------------------------------------


def _sentinels() -> dict[int, tuple[str, str]]:
    """Objects compared with ``is`` that must stay the same object: dataclasses' markers."""
    out = {}
    for name in ("MISSING", "KW_ONLY", "_HAS_DEFAULT_FACTORY", "_FIELD", "_FIELD_CLASSVAR",
                 "_FIELD_INITVAR", "_EMPTY_METADATA"):
        if hasattr(dataclasses, name):
            out[id(getattr(dataclasses, name))] = ("dataclasses", name)
    return out


_SENTINELS = _sentinels()


def _module_attr(module: str, name: str) -> Any:
    """Return the attribute name of the module (a sentinel, by reference)."""
    return getattr(importlib.import_module(module), name)


def _importable(obj: Any) -> bool:
    """Whether ``module.qualname`` finds obj itself in a module other than __main__."""
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str) or module_name == "__main__":
        return False
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is obj


def code_names(code: types.CodeType) -> set[str]:
    """Return the names code and the code nested in it use (globals among them)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= code_names(const)
    return names


#: The instructions that use a global by name (LOAD_NAME: in a class body nested in fn).
_GLOBAL_OPS = frozenset(dis.opmap[op] for op in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME")
                        if op in dis.opmap)


def global_names(code: types.CodeType) -> set[str]:
    """Return the names code and the code nested in it use as globals (not attributes,
    which share co_names: ``model.train()`` does not use a global ``train``)."""
    names = {i.argval for i in dis.get_instructions(code) if i.opcode in _GLOBAL_OPS}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_names(const)
    return names


def referenced_globals(fn: types.FunctionType) -> dict[str, Any]:
    """Return the globals of fn that its code uses."""
    g = fn.__globals__
    return {name: g[name] for name in sorted(global_names(fn.__code__)) if name in g}


def _submodules(refs: dict[str, Any], names: set[str]) -> list[types.ModuleType]:
    """Return the imported submodules of the modules in refs that the code reaches by
    attribute (``xml.dom`` for ``xml.dom.minidom.parse``): the worker imports them too."""
    out = []
    for value in refs.values():
        if not isinstance(value, types.ModuleType):
            continue
        prefix = value.__name__ + "."
        for name, module in list(sys.modules.items()):
            if module is not None and name.startswith(prefix) and set(name[len(prefix):].split(".")) <= names:
                out.append(module)
    return out


#: The type of a function that functools.lru_cache (or cache) wraps.
_LRU_CACHE = type(functools.lru_cache(maxsize=None)(lambda: None))

#: Attributes of a class's __dict__ that its metaclass makes itself.
_CLASS_SKIP = frozenset({"__dict__", "__weakref__", "_abc_impl"})


def _refuse_named_in_main(obj: Any, proto: int) -> None:
    """Raise PicklingError when pickle would send obj by its name in ``__main__`` (its
    ``__reduce__`` says a name): the workers' ``__main__`` is not the script."""
    try:
        reduced = obj.__reduce_ex__(proto)
    except Exception:  # pickle says why, itself
        return
    if isinstance(reduced, str):
        raise pickle.PicklingError(
            f"{type(obj).__qualname__} {reduced!r} pickles as a name of the script (__main__.{reduced}), "
            "and the workers do not run the script"
        )


class _Pickler(pickle.Pickler):
    """A Pickler that sends functions and classes by value when they cannot be imported."""

    def __init__(self, file: Any) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._globals: dict[int, dict[str, Any]] = {}

    def reducer_override(self, obj: Any) -> Any:  # noqa: C901 - one dispatch
        """Return the reduction of what pickle cannot send by itself; NotImplemented else."""
        t = type(obj)
        if id(obj) in _SENTINELS:
            return (_module_attr, _SENTINELS[id(obj)])
        if t is types.FunctionType:
            return NotImplemented if _importable(obj) else self._function(obj)
        if isinstance(obj, type):
            return NotImplemented if _importable(obj) else self._class(obj)
        if t is types.ModuleType:
            return self._module(obj)
        if t is types.CodeType:
            return (_load_code, (python_tag(), marshal.dumps(obj)))
        if t is types.CellType:
            try:
                state: tuple[Any, ...] = (obj.cell_contents,)
            except ValueError:  # an empty cell
                state = ()
            return (_make_cell, (), state, None, None, _set_cell_state)
        if t is staticmethod or t is classmethod:
            return (t, (obj.__func__,))
        if t is property:
            return (property, (obj.fget, obj.fset, obj.fdel, obj.__doc__))
        if t is types.MappingProxyType:
            return (types.MappingProxyType, (dict(obj),))
        if t is typing.TypeVar and not _importable_typevar(obj):  # pickle would name it in __main__
            return (_make_typevar, (obj.__name__, obj.__bound__, obj.__constraints__, obj.__covariant__,
                                    obj.__contravariant__))
        if t is _LRU_CACHE and not _importable(obj):  # pickle would name it in __main__
            return (_lru_cache, (obj.__wrapped__, obj.cache_parameters()))
        if getattr(obj, "__module__", None) == "__main__":
            _refuse_named_in_main(obj, pickle.HIGHEST_PROTOCOL)
        return NotImplemented

    def _function(self, fn: types.FunctionType) -> tuple[Any, ...]:
        """A function by value: its code, then (once recorded) its globals and attributes."""
        base = self._globals.get(id(fn.__globals__))
        if base is None:  # one dict per module, shared by its functions in the worker
            base = {k: fn.__globals__[k] for k in ("__name__", "__package__", "__file__") if k in fn.__globals__}
            self._globals[id(fn.__globals__)] = base
        refs = referenced_globals(fn)
        state = {
            "globals": refs,
            "submodules": _submodules(refs, code_names(fn.__code__)),
            "defaults": fn.__defaults__,
            "kwdefaults": fn.__kwdefaults__,
            "qualname": fn.__qualname__,
            "module": fn.__module__,
            "doc": fn.__doc__,
            "annotations": fn.__annotations__,
            "dict": dict(fn.__dict__),
        }
        return (_make_function, (fn.__code__, base, fn.__name__, fn.__closure__), state, None, None,
                _set_function_state)

    def _class(self, cls: type) -> tuple[Any, ...]:
        """A class by value: an empty class of its metaclass, then its attributes."""
        slots = cls.__dict__.get("__slots__", ())
        slots = (slots,) if isinstance(slots, str) else tuple(slots)
        namespace: dict[str, Any] = {"__module__": cls.__module__}
        if "__slots__" in cls.__dict__:
            namespace["__slots__"] = slots
        attrs = {k: v for k, v in cls.__dict__.items() if k not in _CLASS_SKIP and k not in slots
                 and k not in namespace}
        attrs["__qualname__"] = cls.__qualname__
        if isinstance(cls, enum.EnumMeta):
            members = {name: member.value for name, member in cls.__members__.items()}
            attrs = {k: v for k, v in attrs.items()
                     if k in ("__doc__", "__qualname__") or isinstance(v, (types.FunctionType, staticmethod,
                                                                          classmethod, property))}
            for key in members:
                attrs.pop(key, None)
            return (_make_enum, (type(cls), cls.__name__, cls.__bases__, members, namespace), attrs, None, None,
                    _set_class_state)
        # A generic class's bases as written (Generic[T]): new_class resolves them again.
        bases = cls.__dict__.get("__orig_bases__", cls.__bases__)
        attrs.pop("__orig_bases__", None)
        return (_make_class, (type(cls), cls.__name__, bases, namespace), attrs, None, None, _set_class_state)

    def _module(self, module: types.ModuleType) -> tuple[Any, ...]:
        """A module by reference: the worker imports it by name."""
        name = module.__name__
        if name == "__main__" or sys.modules.get(name) is not module:
            raise pickle.PicklingError(
                f"the module {name!r} cannot be imported by name (it is the script itself, or was loaded "
                "from a file path)"
            )
        return (_import, (name,))


# --- what cannot be sent, and where it is used -------------------------------------------


def find_unsendable(obj: Any, where: str, seen: set[int] | None = None) -> str | None:
    """Return where in obj (described from where) the first part that cannot be pickled
    is, with its type and pickle's error; None when obj pickles.

    Only for the error path: it pickles each part again on its way down."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return None
    seen.add(id(obj))
    try:
        dumps(obj)
        return None
    except NotSendable as e:
        error = str(e)
    for label, part in _parts(obj, where):
        found = find_unsendable(part, label, seen)
        if found:
            return found
    return f"{where} (a {type(obj).__module__}.{type(obj).__qualname__}) cannot be pickled ({error})"


def _parts(obj: Any, where: str) -> list[tuple[str, Any]]:
    """Return the parts of obj that pickling it pickles, each with where it is."""
    if type(obj) is types.FunctionType and not _importable(obj):
        name = f"{obj.__qualname__}()"
        parts = [(f"the global {k!r} that {name} uses", v) for k, v in referenced_globals(obj).items()]
        for var, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
            try:
                parts.append((f"the variable {var!r} that {name} closes over", cell.cell_contents))
            except ValueError:
                pass
        defaults = list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        return parts + [(f"a default argument of {name}", d) for d in defaults]
    if isinstance(obj, type):
        if _importable(obj):
            return []
        return [(f"the attribute {k!r} of class {obj.__qualname__}", v) for k, v in vars(obj).items()
                if k not in _CLASS_SKIP]
    if isinstance(obj, dict):
        return [(f"{where}[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [(f"{where}[{i}]", v) for i, v in enumerate(obj)]
    if isinstance(obj, (staticmethod, classmethod)):
        return [(where, obj.__func__)]
    if isinstance(obj, property):
        return [(where, f) for f in (obj.fget, obj.fset, obj.fdel) if f is not None]
    if hasattr(obj, "__dict__") and not isinstance(obj, (types.ModuleType, types.FunctionType)):
        return [(f"{where}.{k}", v) for k, v in vars(obj).items()]
    return []
