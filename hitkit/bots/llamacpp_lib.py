"""Loading llama.cpp's C library from the prebuilt ``llama-cpp-py-sync`` wheel, on older glibc too.

``llama-cpp-py-sync`` ships llama.cpp as prebuilt CPU shared libraries plus CFFI ABI-mode
declarations of ``llama.h`` (no compiler at install or run time). Its wheels are tagged
manylinux2014 but are built against glibc 2.38, and the only glibc 2.38 symbols they use are the
C23 variants of four parsing functions (``__isoc23_strtol``, ``__isoc23_strtoul``,
``__isoc23_strtoull``, ``__isoc23_sscanf``), which differ from the classic ones only in also
accepting ``0b`` binary literals. On an older glibc (Debian 12 has 2.36) the loader therefore refuses
the libraries with "version `GLIBC_2.38' not found".

:func:`load` first tries the libraries as installed. If that fails for exactly that reason, it makes
a private copy of them in hitkit's cache folder in which those four imports name the classic
functions at glibc's base version (GLIBC_2.2.5), and loads the copy. The copy is checked before it is
written: any other glibc 2.38 import, or an unexpected ELF layout, is refused with the original
error, so nothing is patched that we did not read. The installed package is never modified.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import threading
from pathlib import Path
from typing import Any

_C23 = (b"__isoc23_strtol", b"__isoc23_strtoul", b"__isoc23_strtoull", b"__isoc23_sscanf")
_NEW_VERSION, _BASE_VERSION = b"GLIBC_2.38", b"GLIBC_2.2.5"
_SHT_DYNSYM, _SHT_VERNEED, _SHT_VERSYM = 11, 0x6FFFFFFE, 0x6FFFFFFF
_lock = threading.Lock()
_loaded: tuple[Any, Any] | None = None


class LlamaCppUnavailable(ImportError):
    """llama.cpp cannot be used here (package missing or its libraries do not load)."""


def _cstr(data: bytes | bytearray, offset: int) -> bytes:
    return bytes(data[offset : data.index(b"\0", offset)])


def _sections(data: bytes | bytearray) -> list[tuple[int, int, int, int, int]]:
    """(type, offset, size, link, info) of every section of a little-endian ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian 64-bit ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        _name, stype, _flags, _addr, off, size, link, info = struct.unpack_from(
            "<IIQQQQII", data, shoff + i * shentsize
        )
        out.append((stype, off, size, link, info))
    return out


def retarget_c23_imports(data: bytes) -> bytes | None:
    """Return a copy of a shared library whose C23 glibc 2.38 imports name the classic functions.

    None when the file imports nothing from glibc 2.38. Raises ValueError when it imports something
    else from glibc 2.38, or the layout is not what this function understands.
    """
    buf = bytearray(data)
    sections = _sections(buf)
    verneed = [s for s in sections if s[0] == _SHT_VERNEED]
    dynsym = [s for s in sections if s[0] == _SHT_DYNSYM]
    versym = [s for s in sections if s[0] == _SHT_VERSYM]
    if len(verneed) != 1 or len(dynsym) != 1 or len(versym) != 1:
        return None
    _t, vn_off, _s, strtab_index, vn_count = verneed[0]
    strtab = sections[strtab_index][1]
    new_aux = base_aux = None
    new_index = None
    pos = vn_off
    for _ in range(vn_count):
        _ver, cnt, file_, aux, nxt = struct.unpack_from("<HHIII", buf, pos)
        if _cstr(buf, strtab + file_) == b"libc.so.6":
            apos = pos + aux
            for _ in range(cnt):
                _hash, _flags, other, name, anext = struct.unpack_from("<IHHII", buf, apos)
                version = _cstr(buf, strtab + name)
                if version == _NEW_VERSION:
                    new_aux, new_index = apos, other
                elif version == _BASE_VERSION:
                    base_aux = apos
                apos += anext
        pos += nxt
    if new_aux is None:
        return None
    if base_aux is None:
        raise ValueError("no GLIBC_2.2.5 version entry to retarget to")
    # Every symbol at the 2.38 version index must be one of the four C23 parsers.
    _t, ds_off, ds_size, ds_link, _i = dynsym[0]
    _t, vs_off, _vs, _l, _i = versym[0]
    dynstr = sections[ds_link][1]
    renames = []
    for i in range(ds_size // 24):
        (st_name,) = struct.unpack_from("<I", buf, ds_off + i * 24)
        (ver,) = struct.unpack_from("<H", buf, vs_off + i * 2)
        if ver & 0x7FFF != new_index:
            continue
        name = _cstr(buf, dynstr + st_name)
        if name not in _C23:
            raise ValueError(f"imports {name.decode()} from glibc 2.38, not only the C23 parsers")
        renames.append(dynstr + st_name)
    for offset in renames:
        name = _cstr(buf, offset)
        classic = name.removeprefix(b"__isoc23_")
        # Written over the head of the old string: a shorter name ended by its own NUL. The tail
        # ("...strtol\0") is left as it was, so a name shared by suffix still reads the same.
        buf[offset : offset + len(classic) + 1] = classic + b"\0"
    base_hash, _f, _o, base_name, _n = struct.unpack_from("<IHHII", buf, base_aux)
    struct.pack_into("<I", buf, new_aux, base_hash)
    struct.pack_into("<I", buf, new_aux + 8, base_name)
    return bytes(buf)


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hitkit" / "llama-cpp"


def compat_copy(lib_dir: Path, cache_root: Path | None = None) -> Path:
    """Copy the package's shared libraries into the cache, C23 imports retargeted; return the folder."""
    files = sorted(p for p in lib_dir.iterdir() if p.is_file() and ".so" in p.name)
    digest = hashlib.sha256()
    for p in files:
        digest.update(p.name.encode())
        digest.update(str(p.stat().st_size).encode())
        digest.update(str(p.stat().st_mtime_ns).encode())
    target = (cache_root or _cache_root()) / digest.hexdigest()[:16]
    if (target / ".complete").exists():
        return target
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for p in files:
        data = p.read_bytes()
        patched = retarget_c23_imports(data)
        (tmp / p.name).write_bytes(patched if patched is not None else data)
    (tmp / ".complete").write_text("ok\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return target


def load() -> tuple[Any, Any]:
    """Return ``(ffi, lib)`` for llama.cpp; raise :class:`LlamaCppUnavailable` saying why not."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        try:
            from llama_cpp_py_sync import _cffi_bindings as bindings
        except ImportError as exc:
            raise LlamaCppUnavailable(
                f"the llama.cpp engine needs the llama-cpp-py-sync package ({exc}): pip install 'hitkit[bots]'"
            ) from None
        # llama.cpp's OpenMP threads spin while they wait for each other by default. On a machine
        # whose cores are shared (a web tier, a simulated crowd, other users) a spinning thread
        # holds a core its partner needs: decoding fell from 13 to 1 token/s on 2 busy cores.
        # Passive waiting sleeps instead. libgomp reads this once, when it is loaded just below.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        ffi = bindings.get_ffi()
        lib_dir = Path(bindings.__file__).parent
        try:
            lib = ffi.dlopen(str(lib_dir / "libllama.so"))
        except OSError as exc:
            if _NEW_VERSION.decode() not in str(exc):
                raise LlamaCppUnavailable(f"llama.cpp's library does not load: {exc}") from None
            try:
                lib = ffi.dlopen(str(compat_copy(lib_dir) / "libllama.so"))
            except (OSError, ValueError) as exc2:
                raise LlamaCppUnavailable(
                    f"llama.cpp's library needs glibc 2.38 and no compatible copy could be made "
                    f"({exc2}); use bots.serve.engine: transformers"
                ) from None
        _loaded = (ffi, lib)
        return _loaded
