"""How a kernel reads its array arguments: numpy arrays as they are, other objects through
``__dlpack__`` (bfloat16 tensors, which numpy cannot hold, as their uint16 bits) or
``__array_interface__``; anything else is an ``ArgumentError`` naming the argument.
Example: ``as_array("A", torch.ones(3))`` is a numpy view of the tensor's memory.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import ArgumentError


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                         ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype, _capsule_is_valid.argtypes = ctypes.c_int, [ctypes.py_object,
                                                                       ctypes.c_char_p]
_capsule_rename = ctypes.pythonapi.PyCapsule_SetName
_capsule_rename.restype, _capsule_rename.argtypes = ctypes.c_int, [ctypes.py_object,
                                                                   ctypes.c_char_p]


class _DLPackBits:
    """Owns a consumed DLPack tensor (calls its deleter when the last view goes) and shows
    its memory to numpy as unsigned integers of the element's width."""

    def __init__(self, managed, t):
        self._managed = managed
        shape = tuple(t.shape[d] for d in range(t.ndim))
        size = t.bits // 8
        strides = None if not t.strides else tuple(t.strides[d] * size for d in range(t.ndim))
        # an empty tensor may have no memory at all (a NULL data pointer)
        self.__array_interface__ = {"data": ((t.data or 0) + t.byte_offset, False), "version": 3,
                                    "typestr": f"<u{size}", "shape": shape, "strides": strides}

    def __del__(self):
        m = self._managed
        if m is not None and m.contents.deleter:
            _DELETER(m.contents.deleter)(m)
        self._managed = None


def dlpack_bfloat16_bits(x):
    """The raw uint16 bits of a CPU bfloat16 tensor read through ``__dlpack__`` (numpy's
    ``from_dlpack`` has no bfloat16), as a numpy array sharing its memory; None for any
    other tensor. Example: ``dlpack_bfloat16_bits(torch.ones(4, dtype=torch.bfloat16))``."""
    try:
        capsule = x.__dlpack__()
    except Exception:   # noqa: BLE001 - any producer failure means "not readable here"
        return None
    if not _capsule_is_valid(capsule, b"dltensor"):
        return None
    managed = ctypes.cast(_capsule_pointer(capsule, b"dltensor"),
                          ctypes.POINTER(_DLManagedTensor))
    t = managed.contents.dl_tensor
    if not (t.device_type == 1 and t.code == 4 and t.bits == 16 and t.lanes == 1):
        return None     # the capsule is not consumed: its own destructor frees it
    _capsule_rename(capsule, b"used_dltensor")
    return np.asarray(_DLPackBits(managed, t)).view(BFloat16Bits)


class BFloat16Bits(np.ndarray):
    """The uint16 bits of a bfloat16 tensor read through ``__dlpack__``: a plain uint16
    array that remembers it was bfloat16, so a dtype error can say what the user passed."""


def _has_attribute(x, name):
    """``hasattr``, counting an attribute whose property raises as present (reading it
    then fails with the producer's message, as an ArgumentError)."""
    try:
        return hasattr(x, name)
    except Exception:   # noqa: BLE001 - any producer's property
        return True


def as_array(name, x, written=False):
    """A numpy view of an array-like (numpy, ``__dlpack__``, ``__array_interface__``);
    ``written``: the kernel writes it (an ``out=`` array)."""
    if isinstance(x, np.ndarray):
        return x
    if written and isinstance(x, np.generic):
        # np.asarray would copy the immutable scalar: the result would be lost
        raise ArgumentError(f"argument {name}: a numpy scalar ({type(x).__name__}) cannot be "
                            "written into; pass a 0-d array (e.g. np.zeros((), np.float32)) "
                            "or use the returned array")
    if hasattr(x, "__dlpack__"):
        is_neg = getattr(x, "is_neg", None)
        if callable(is_neg) and is_neg() is True:
            # torch's lazy negation (x.conj().imag): the exported memory is not negated
            raise ArgumentError(f"argument {name}: the tensor carries a pending negation, which "
                                "__dlpack__ would drop; pass x.resolve_neg()")
        if not written and getattr(x, "requires_grad", False) is True and \
                callable(getattr(x, "detach", None)):
            x = x.detach()      # read only: the values, as torch.no_grad would
        try:
            return np.from_dlpack(x)
        except Exception as e:   # noqa: BLE001 - whatever the producer raises, say so
            # numpy has no bfloat16: read such a tensor's bits ourselves
            bits = dlpack_bfloat16_bits(x)
            if bits is not None:
                return bits
            raise ArgumentError(f"argument {name}: cannot read it through __dlpack__ ({e}); pass a "
                                "CPU array") from None
    if _has_attribute(x, "__array_interface__") or _has_attribute(x, "__array__"):
        try:
            return np.asarray(x)
        except Exception as e:   # noqa: BLE001 - a malformed interface from any producer
            how = "__array_interface__" if _has_attribute(x, "__array_interface__") \
                else "__array__"
            raise ArgumentError(f"argument {name}: cannot read it through {how} ({e}); pass a "
                                "numpy array") from None
    raise ArgumentError(f"argument {name}: expected an array (numpy, or an object with __dlpack__ "
                        f"/ __array_interface__), got {type(x).__name__}")
