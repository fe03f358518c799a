"""Simulation state as plain data, so that a checkpoint can continue episodes without pickle.

Unpickling runs whatever code the pickle names, and run directories are shared: a checkpoint
must never need it. :func:`capture` turns a simulation's objects into a tree of plain values
(``None``, bools, numbers, strings, and dicts and lists of them; binary data as latin-1
strings, which every torch's ``torch.load(weights_only=True)`` reads back), and :func:`restore` writes such a tree back into
a freshly built simulation:

* numbers, strings, bytes, numpy arrays and scalars, lists, tuples, dicts, sets, deques,
  numpy and Python random generators, enums and instances of ordinary classes (their
  ``__dict__`` or ``__slots__``) are captured; a class's own ``__getstate__`` /
  ``__setstate__``, if it defines them, is used instead (that is the hook for a simulation
  whose state is not plain: return plain data from ``__getstate__`` and rebuild the rest in
  ``__setstate__``);
* objects that are shared, or that refer to each other, stay so;
* restoring makes new objects (as unpickling does), but only of classes from modules that the
  freshly built simulation already uses: a state names no code to import, and a crafted one
  can build nothing else.

Anything else (an open file, a C extension's object, a function) makes :func:`capture` raise
:class:`NotPlainError` naming where it is. Given ``allow_pickle=True``, such a value is pickled
instead, signed with this user's key (:mod:`entityrl.env.signing`), and :func:`restore`
unpickles it only when also given ``allow_pickle=True`` and the signature verifies.
"""

from __future__ import annotations

import ast
import enum
import pickle
import random
import sys
import types
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from entityrl.env import signing

PLAIN_SCALARS = (type(None), bool, int, float, str)
"""Values a tree holds as they are; every other value becomes a node, a dict ``{"t": kind,
"id": n, ...}``."""

_HEAP_TYPE = 1 << 9
"""``Py_TPFLAGS_HEAPTYPE``: set for classes written in Python, clear for those of C extensions
(files, locks, sockets, a physics engine's world), whose state is not in attributes."""

_BUILTIN_VALUES = (dict, list, tuple, set, frozenset, deque, str, bytes, int, float, complex)

_DEFAULT_FACTORIES = {"list": list, "dict": dict, "set": set, "int": int, "float": float}


class NotPlainError(NotImplementedError):
    """A simulation's state holds a value :func:`capture` cannot write as plain data."""

    def __init__(self, reason: str, path: str = "") -> None:
        self.reason, self.path = reason, path
        super().__init__(f"{path}: {reason}" if path else reason)

    def inside(self, segment: str) -> NotPlainError:
        """The same error, seen from the value holding this one at ``segment``."""
        return NotPlainError(self.reason, segment + self.path)


class StateError(ValueError):
    """A saved state does not fit, or is not a state :func:`capture` wrote."""


class PickleRefusedError(StateError):
    """A saved state holds pickled parts that may not, or cannot safely, be unpickled."""


# ---------------------------------------------------------------------------- capture
def capture(value: Any, *, allow_pickle: bool = False, where: str = "state") -> Any:
    """``value`` as a tree of plain data (see the module's description)."""
    try:
        return _Capture(allow_pickle).node(value)
    except NotPlainError as err:
        raise err.inside(where) from None


class _Capture:
    # Where a value sits is spelled out only when it is not plain data: building those names
    # for every value would cost more than the rest of the capture.
    def __init__(self, allow_pickle: bool) -> None:
        self.allow_pickle = allow_pickle
        self.seen: dict[int, int] = {}
        self.keep_alive: list[Any] = []  # ids stay unique while the objects live

    def node(self, value: Any) -> Any:
        if type(value) in PLAIN_SCALARS:
            return value
        if id(value) in self.seen:
            return {"t": "ref", "id": self.seen[id(value)]}
        ref = self.seen[id(value)] = len(self.seen)
        self.keep_alive.append(value)
        try:
            fields = self.fields(value)
        except NotPlainError as err:
            if not self.allow_pickle:
                raise
            try:
                fields = {"t": "pickle", **signing.signed_pickle(value)}
            except NotImplementedError as why:
                raise NotPlainError(f"{err.reason}; {why}", err.path) from None
        fields["id"] = ref
        return fields

    def nodes(self, values: Iterable[Any], segment: Callable[[int], str]) -> list[Any]:
        """The nodes of ``values``; ``segment(i)`` names where the ``i``-th one sits."""
        made: list[Any] = []
        try:
            for value in values:
                made.append(self.node(value))
        except NotPlainError as err:
            raise err.inside(segment(len(made))) from None
        return made

    def fields(self, value: Any) -> dict[str, Any]:
        kind = type(value)
        if kind is bytes:
            return {"t": "bytes", "data": value.decode("latin-1")}
        if isinstance(value, np.ndarray):
            return self.array(value)
        if isinstance(value, np.generic):
            return {"t": "npscalar", "dtype": value.dtype.str, "data": _text(value.tobytes())}
        if isinstance(value, np.random.Generator):
            return {"t": "generator", "state": self.node(value.bit_generator.state)}
        if isinstance(value, np.random.RandomState):
            return {"t": "randomstate", "state": self.node(value.get_state(legacy=False))}
        if kind is random.Random:
            return {"t": "random", "state": self.node(value.getstate())}
        if isinstance(value, enum.Enum):
            return {"t": "enum", "class": _class_name(kind), "name": value.name}
        if isinstance(value, np.dtype):
            return {"t": "dtype", "dtype": repr(np.lib.format.dtype_to_descr(value))}
        if isinstance(value, type) and value.__flags__ & _HEAP_TYPE:
            return {"t": "class", "class": _class_name(value)}  # a class as a value
        if kind is types.FunctionType and _found(value.__module__, value.__qualname__) is value:
            return {"t": "function", "name": _class_name(value)}  # by name, as pickle does
        if kind in (list, tuple, set, frozenset):
            return {"t": kind.__name__, "items": self.nodes(value, _index)}
        if kind is deque:
            return {"t": "deque", "items": self.nodes(value, _index), "maxlen": value.maxlen}
        if kind in (dict, OrderedDict, defaultdict):
            return self.mapping(value)
        if isinstance(value, tuple) and hasattr(kind, "_fields"):  # a namedtuple
            items = self.nodes(value, lambda i: f".{kind._fields[i]}")
            return {"t": "namedtuple", "class": _class_name(kind), "items": items}
        if (
            kind not in _BUILTIN_VALUES
            and isinstance(value, _BUILTIN_VALUES)
            and not _own_state_hooks(kind)
        ):
            # A subclass of a container or number keeps part of its state outside attributes.
            base = next(b for b in _BUILTIN_VALUES if isinstance(value, b))
            raise NotPlainError(
                f"a {_class_name(kind)} (a subclass of {base.__name__}) is not plain data; give "
                "it __getstate__/__setstate__ that return and take plain data"
            )
        return self.instance(value)

    def array(self, value: np.ndarray) -> dict[str, Any]:
        if value.dtype.hasobject:
            raise NotPlainError("a numpy array of Python objects is not plain data")
        return {
            "t": "ndarray",
            "dtype": repr(np.lib.format.dtype_to_descr(value.dtype)),  # see _dtype()
            "shape": list(value.shape),
            "data": _text(np.ascontiguousarray(value).tobytes()),
        }

    def mapping(self, value: dict[Any, Any]) -> dict[str, Any]:
        keys = list(value)
        items = zip(
            self.nodes(keys, lambda i: f" key {keys[i]!r}"),
            self.nodes(value.values(), lambda i: f"[{keys[i]!r}]"),
            strict=True,
        )
        fields: dict[str, Any] = {"t": "dict", "items": [list(item) for item in items]}
        if type(value) is OrderedDict:
            fields["t"] = "ordereddict"
        elif type(value) is defaultdict:
            factory = next(
                (name for name, f in _DEFAULT_FACTORIES.items() if f is value.default_factory),
                None,
            )
            if factory is None and value.default_factory is not None:
                raise NotPlainError(
                    f"a defaultdict whose default is {value.default_factory!r} (plain data "
                    f"allows {', '.join(_DEFAULT_FACTORIES)} or None)"
                )
            fields.update(t="defaultdict", factory=factory)
        return fields

    def instance(self, value: Any) -> dict[str, Any]:
        kind = type(value)
        name = _class_name(kind)
        if not kind.__flags__ & _HEAP_TYPE:
            raise NotPlainError(
                f"a {name} is not plain data (not an instance of a class written in Python); "
                "give the class holding it __getstate__/__setstate__ that return and take "
                "plain data"
            )
        if _own_state_hooks(kind):
            return {"t": "custom", "class": name, "state": self.node(value.__getstate__())}
        attributes = _attributes(value)
        assert attributes is not None  # an instance of a Python class
        names = list(attributes)
        values = self.nodes(attributes.values(), lambda i: f".{names[i]}")
        return {"t": "object", "class": name, "attrs": dict(zip(names, values, strict=True))}


def _dtype(description: Any) -> np.dtype:
    # A structured dtype's description is a list of tuples: kept as its repr, read back with
    # ast.literal_eval, which evaluates literals only.
    dtype = np.lib.format.descr_to_dtype(ast.literal_eval(description))
    if dtype.hasobject:
        raise StateError("not a saved state: a dtype of Python objects")
    return dtype


def _found(module_name: str, qualname: str) -> Any:
    """What ``module:qualname`` names, only in a module already imported (never importing
    one), or None."""
    found: Any = sys.modules.get(module_name)
    for part in qualname.split(".") if found is not None else ():
        found = getattr(found, part, None)
    return found


def _index(i: int) -> str:
    return f"[{i}]"


def _text(data: bytes) -> str:
    # latin-1 maps each byte to one character and back: lossless, and a str loads with
    # weights_only in every torch (bytes only from torch 2.5 on).
    return data.decode("latin-1")


def _binary(text: Any) -> bytes:
    if not isinstance(text, str):
        raise StateError(f"not a saved state: binary data as {type(text).__name__}")
    return text.encode("latin-1")


def _class_name(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def _own_state_hooks(kind: type) -> bool:
    """Whether ``kind`` defines its own ``__getstate__`` and ``__setstate__`` (Python gives
    every object a default ``__getstate__``)."""
    return getattr(kind, "__getstate__", None) is not getattr(
        object, "__getstate__", None
    ) and hasattr(kind, "__setstate__")


def _slot_names(kind: type) -> Iterator[str]:
    for base in kind.__mro__:
        slots = base.__dict__.get("__slots__", ())
        yield from (slots,) if isinstance(slots, str) else slots


def _attributes(value: Any) -> dict[str, Any] | None:
    """The instance's attributes, or None when it is not an instance of a Python class."""
    if not type(value).__flags__ & _HEAP_TYPE:
        return None
    found = dict(getattr(value, "__dict__", {}))
    for slot in _slot_names(type(value)):
        if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
            found[slot] = getattr(value, slot)
    return found


# ---------------------------------------------------------------------------- restore
def restore(target: Any, tree: Any, *, allow_pickle: bool = False) -> Any:
    """The value ``tree`` (from :func:`capture`) describes, made of classes that ``target``
    (the same simulation, freshly built) uses.

    Raises :class:`PickleRefusedError` before changing anything if the tree holds pickled
    parts and ``allow_pickle`` is false or a signature does not verify, and
    :class:`StateError` if the tree is not a state or names a class the fresh simulation does
    not use.
    """
    check_pickled_parts(tree, allow_pickle=allow_pickle)
    return _Restore(_modules_in_use(target)).value(tree)


def check_pickled_parts(tree: Any, *, allow_pickle: bool) -> None:
    """Raise :class:`PickleRefusedError` if ``tree`` (any nesting of states) holds pickled
    parts and ``allow_pickle`` is false, or one of them is not signed by this user."""
    pickled = list(_pickled_parts(tree))
    if pickled and not allow_pickle:
        raise PickleRefusedError(
            f"the saved state holds {len(pickled)} pickled part(s), and unpickling is not "
            "allowed (it would run any code the run directory names)"
        )
    for part in pickled:
        if not signing.verifies(part):
            raise PickleRefusedError(
                "the saved state's pickled parts were not written by this user on this machine, "
                "or were changed since (unpickling them could run any code)"
            )


def _pickled_parts(tree: Any) -> Iterator[dict[str, Any]]:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("t") == "pickle":
                yield node
            else:
                stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _modules_in_use(target: Any) -> set[str]:
    """The modules of every class the fresh simulation's objects are instances of."""
    modules = {"entityrl"}
    seen: set[int] = set()
    stack = [target]
    while stack:
        value = stack.pop()
        if type(value) in PLAIN_SCALARS or id(value) in seen or isinstance(value, np.ndarray):
            continue
        seen.add(id(value))
        modules.add(type(value).__module__)
        if isinstance(value, (type, types.FunctionType)):  # held as a value
            modules.add(value.__module__)
            continue
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset, deque)):
            stack.extend(value)
        else:
            attributes = _attributes(value)
            if attributes:
                stack.extend(attributes.values())
    return modules


_KINDS = frozenset(
    {"list", "tuple", "set", "frozenset", "deque", "dict", "ordereddict", "defaultdict", "bytes",
     "ndarray", "npscalar", "dtype", "generator", "randomstate", "random", "enum", "class",
     "function", "namedtuple", "custom", "object", "pickle"}
)  # fmt: skip
"""The node kinds :func:`capture` writes (each made by the ``_Restore`` method of its name)."""


class _Restore:
    def __init__(self, modules: set[str]) -> None:
        self.modules = modules
        self.made: dict[int, Any] = {}

    def value(self, node: Any) -> Any:
        if type(node) in PLAIN_SCALARS:
            return node
        if not isinstance(node, dict) or not isinstance(node.get("t"), str):
            raise StateError(f"not a saved state: found {type(node).__name__} where a node goes")
        kind = node["t"]
        if kind == "ref":
            if node.get("id") not in self.made:
                raise StateError(f"not a saved state: a reference to unknown node {node.get('id')}")
            return self.made[node["id"]]
        if kind not in _KINDS:
            raise StateError(f"not a saved state: unknown node kind {kind!r}")
        build = getattr(self, f"_{kind}")
        try:
            return build(node)
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            if isinstance(err, StateError):
                raise
            raise StateError(f"not a saved state: a malformed {kind} node ({err!r})") from None

    def _keep(self, node: dict[str, Any], value: Any) -> Any:
        self.made[node["id"]] = value
        return value

    def _items(self, node: dict[str, Any]) -> list[Any]:
        return [self.value(item) for item in node["items"]]

    # Containers are registered before their items are made: items may refer back to them.
    def _list(self, node: dict[str, Any]) -> list[Any]:
        made = self._keep(node, [])
        made.extend(self._items(node))
        return made

    def _tuple(self, node: dict[str, Any]) -> tuple[Any, ...]:
        return self._keep(node, tuple(self._items(node)))

    def _set(self, node: dict[str, Any]) -> set[Any]:
        made = self._keep(node, set())
        made.update(self._items(node))
        return made

    def _frozenset(self, node: dict[str, Any]) -> frozenset[Any]:
        return self._keep(node, frozenset(self._items(node)))

    def _deque(self, node: dict[str, Any]) -> deque[Any]:
        made = self._keep(node, deque(maxlen=node["maxlen"]))
        made.extend(self._items(node))
        return made

    def _dict(self, node: dict[str, Any]) -> dict[Any, Any]:
        return self._fill_mapping(node, {})

    def _ordereddict(self, node: dict[str, Any]) -> dict[Any, Any]:
        return self._fill_mapping(node, OrderedDict())

    def _defaultdict(self, node: dict[str, Any]) -> dict[Any, Any]:
        factory = node["factory"]
        if factory is not None and factory not in _DEFAULT_FACTORIES:
            raise StateError(f"not a saved state: a defaultdict of {factory!r}")
        return self._fill_mapping(
            node, defaultdict(_DEFAULT_FACTORIES[factory] if factory else None)
        )

    def _fill_mapping(self, node: dict[str, Any], made: dict[Any, Any]) -> Any:
        self._keep(node, made)
        for key_node, value_node in node["items"]:
            made[self.value(key_node)] = self.value(value_node)
        return made

    def _bytes(self, node: dict[str, Any]) -> bytes:
        return self._keep(node, _binary(node["data"]))

    def _ndarray(self, node: dict[str, Any]) -> np.ndarray:
        dtype = _dtype(node["dtype"])
        array = np.frombuffer(_binary(node["data"]), dtype=dtype).reshape(node["shape"]).copy()
        return self._keep(node, array)

    def _npscalar(self, node: dict[str, Any]) -> np.generic:
        dtype = np.dtype(node["dtype"])
        if dtype.hasobject:
            raise StateError("not a saved state: a numpy scalar of a Python object")
        return self._keep(node, np.frombuffer(_binary(node["data"]), dtype=dtype)[0])

    def _generator(self, node: dict[str, Any]) -> np.random.Generator:
        state = self.value(node["state"])
        bit_generator = getattr(np.random, str(state["bit_generator"]), None)
        if not (
            isinstance(bit_generator, type) and issubclass(bit_generator, np.random.BitGenerator)
        ):
            raise StateError(f"not a saved state: bit generator {state['bit_generator']!r}")
        made = np.random.Generator(bit_generator())
        made.bit_generator.state = state
        return self._keep(node, made)

    def _randomstate(self, node: dict[str, Any]) -> np.random.RandomState:
        made = np.random.RandomState()
        made.set_state(self.value(node["state"]))
        return self._keep(node, made)

    def _random(self, node: dict[str, Any]) -> random.Random:
        made = random.Random()
        made.setstate(self.value(node["state"]))
        return self._keep(node, made)

    def _dtype(self, node: dict[str, Any]) -> np.dtype:
        return self._keep(node, _dtype(node["dtype"]))

    def _class(self, node: dict[str, Any]) -> type:
        return self._keep(node, self._lookup_class(node["class"]))

    def _function(self, node: dict[str, Any]) -> types.FunctionType:
        module_name, _, qualname = str(node["name"]).partition(":")
        found = _found(module_name, qualname) if self._in_use(module_name) else None
        if type(found) is not types.FunctionType:
            raise StateError(
                f"the saved state holds the function {node['name']}, which the freshly built "
                "environments do not use"
            )
        return self._keep(node, found)

    def _enum(self, node: dict[str, Any]) -> enum.Enum:
        kind = self._lookup_class(node["class"])
        if not issubclass(kind, enum.Enum):
            raise StateError(f"not a saved state: {node['class']} is not an enum")
        return self._keep(node, kind[node["name"]])

    def _namedtuple(self, node: dict[str, Any]) -> tuple[Any, ...]:
        kind = self._lookup_class(node["class"])
        if not (issubclass(kind, tuple) and hasattr(kind, "_fields")):
            raise StateError(f"not a saved state: {node['class']} is not a namedtuple")
        return self._keep(node, kind(*self._items(node)))

    def _custom(self, node: dict[str, Any]) -> Any:
        kind = self._lookup_class(node["class"])
        made = self._keep(node, kind.__new__(kind))
        made.__setstate__(self.value(node["state"]))
        return made

    def _object(self, node: dict[str, Any]) -> Any:
        kind = self._lookup_class(node["class"])
        made = self._keep(node, kind.__new__(kind))
        slots = set(_slot_names(kind))
        for name, value_node in node["attrs"].items():
            if not isinstance(name, str):
                raise StateError(f"not a saved state: attribute name {name!r}")
            value = self.value(value_node)
            if name in slots:
                object.__setattr__(made, name, value)
            else:
                made.__dict__[name] = value  # as unpickling does: no __setattr__ runs
        return made

    def _pickle(self, node: dict[str, Any]) -> Any:
        # Reached only after restore() verified every pickled part's signature.
        return self._keep(node, pickle.loads(_binary(node["data"])))

    def _in_use(self, module_name: str) -> bool:
        return module_name in self.modules or module_name.split(".")[0] == "entityrl"

    def _lookup_class(self, name: Any) -> type:
        """The class ``module:qualname``, only from a module the fresh simulation uses, and
        only if that module is already imported: a saved state never imports code."""
        module_name, _, qualname = str(name).partition(":")
        found = _found(module_name, qualname) if self._in_use(module_name) else None
        if (
            not isinstance(found, type)
            or found.__module__ != module_name
            or not found.__flags__ & _HEAP_TYPE  # capture() writes Python classes only
        ):
            raise StateError(
                f"the saved state holds a {name}, a class the freshly built environments do not "
                "use: it is not created"
            )
        return found


# ---------------------------------------------------------------------------- attributes
def capture_attributes(
    owner: Any, names: Sequence[str], *, allow_pickle: bool = False, where: str = ""
) -> Any:
    """The attributes ``names`` of ``owner`` as one tree (a vectorized environment's state)."""
    where = where or type(owner).__name__
    return capture({n: getattr(owner, n) for n in names}, allow_pickle=allow_pickle, where=where)


def restore_attributes(
    owner: Any, names: Sequence[str], tree: Any, *, allow_pickle: bool = False
) -> None:
    """Set the attributes ``names`` of ``owner`` from a :func:`capture_attributes` tree."""
    restored = restore({n: getattr(owner, n) for n in names}, tree, allow_pickle=allow_pickle)
    if not isinstance(restored, dict) or set(restored) != set(names):
        got = sorted(map(str, restored)) if isinstance(restored, dict) else type(restored).__name__
        raise StateError(
            f"not a state of this version's {type(owner).__name__}: expected the attributes "
            f"{sorted(names)}, got {got}"
        )
    for name, value in restored.items():
        setattr(owner, name, value)
