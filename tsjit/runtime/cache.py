"""The on-disk kernel cache: one self-contained, checksummed file per compiled specialization.

File layout (``<directory>/<key>.tsjitc``; all integers little-endian)::

    offset  size  field
    0       8     magic  b"TSJITC1\\0"
    8       4     format version (uint32, currently 1)
    12      8     metadata length M (uint64)
    20      M     metadata: UTF-8 JSON object; its "blobs" member lists [name, length]
                  of each payload blob in file order
    20+M    ...   the blobs (cubin, then optional ptx / llir text), back to back
    end-32  32    SHA-256 of every byte before it

Why one file (anchors.md §5 #4, #5): a Triton reader on a shared filesystem once paired
one writer's cubin with another writer's metadata; here an entry is written whole to a
temporary file in the same directory and ``os.replace``\\ d into place, which is atomic on
POSIX, so concurrent writers of one key all succeed and exactly one complete file
remains.  Readers verify the checksum, and any problem reading an entry (missing,
truncated, bad magic or version, bad checksum, bad JSON, permissions, ``EBUSY`` on a
network filesystem) is a miss: :meth:`KernelCache.get` returns ``None`` and never raises.
Corrupt files are deleted.  If the directory cannot be created or written, the cache
warns once and stops writing (reads still work when possible).

An entry stores its own key (metadata ``cache_key``) and :meth:`KernelCache.get` compares it, so
an entry copied or renamed under another key's file name is a miss.  A cache path that is not
a regular file (a directory, FIFO, socket or device someone put there) is skipped: it is opened
with ``O_NONBLOCK`` and checked with ``fstat`` before a byte is read, and never replaced or deleted.
``clear``/``info`` touch only files tsjit wrote: ``<hex key>.tsjitc`` regular files that start
with the magic, and this module's own temporary files (``.<hex key>.<random>.tmp``) once they are
older than :data:`STALE_TEMP_SECONDS` (a younger one may belong to a writer still at work);
``clear`` also deletes the small memo files (``tsjit-memo-<name>.json``, :meth:`KernelCache.read_memo`).

The in-memory layer (key -> loaded kernel) belongs to the Kernel, not to this module.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
import tempfile
import time
from dataclasses import dataclass, field

from tsjit import env
from tsjit.errors import CacheError, TsjitError, warn

MAGIC = b"TSJITC1\0"
FORMAT_VERSION = 1
SUFFIX = ".tsjitc"
HEADER = struct.Struct("<8sIQ")
_DIGEST_BYTES = 32
_KEY_PATTERN = re.compile(r"^[0-9a-f]{16,128}$")
_ENTRY_NAME = re.compile(r"^[0-9a-f]{16,128}" + re.escape(SUFFIX) + "$")
_TEMP_NAME = re.compile(r"^\.[0-9a-f]{16,128}\.[A-Za-z0-9_]+\.tmp$")
_MEMO_NAME = re.compile(r"^tsjit-memo-[a-z0-9-]+\.json$")
STALE_TEMP_SECONDS = 600
_warned_directories: set[str] = set()


@dataclass
class CacheEntry:
    """One compiled specialization.

    Attributes:
        cubin: the device binary.
        metadata: JSON-serializable facts, by convention ``kernel_name``, ``target``
            (``"sm_90a"``), ``registers``, ``spill_bytes``, ``smem_bytes``, ``tool``
            (``"nvjitlink 13.5"``), ``dependencies`` (record -> digest, see
            :mod:`tsjit.frontend.dependencies`); the cache adds ``cache_key`` (the key it was
            stored under) and ``created`` (Unix time, when absent) on :meth:`KernelCache.put`.
        ptx: PTX text, when kept.
        llir: LLVM IR text, when kept.
    """

    cubin: bytes
    metadata: dict = field(default_factory=dict)
    ptx: str | None = None
    llir: str | None = None


def encode_entry(entry: CacheEntry) -> bytes:
    """The file bytes of ``entry`` (see the module docstring).

    Raises:
        TsjitError: the metadata is not JSON-serializable (names the offending part).
    """
    blobs = [("cubin", bytes(entry.cubin))]
    if entry.ptx is not None:
        blobs.append(("ptx", entry.ptx.encode()))
    if entry.llir is not None:
        blobs.append(("llir", entry.llir.encode()))
    document = dict(entry.metadata)
    document["blobs"] = [[name, len(data)] for name, data in blobs]
    try:
        meta = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise TsjitError(f"cache entry metadata is not JSON-serializable: {exc}") from None
    body = b"".join([HEADER.pack(MAGIC, FORMAT_VERSION, len(meta)), meta, *(data for _, data in blobs)])
    return body + hashlib.sha256(body).digest()


def decode_entry(data: bytes) -> CacheEntry:
    """Parse and verify the file bytes of an entry.

    Raises:
        CacheError: truncated data, wrong magic or format version, checksum mismatch,
            malformed JSON, or blob lengths that do not add up.
    """
    if len(data) < HEADER.size + _DIGEST_BYTES:
        raise CacheError(f"entry truncated: {len(data)} bytes")
    magic, version, meta_length = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CacheError(f"bad magic {magic!r}")
    if version != FORMAT_VERSION:
        raise CacheError(f"format version {version}, expected {FORMAT_VERSION}")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise CacheError("checksum mismatch")
    start = HEADER.size
    try:
        document = json.loads(body[start:start + meta_length].decode())
        table = [(str(name), int(length)) for name, length in document.pop("blobs")]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CacheError(f"bad metadata: {exc}") from None
    offset = start + meta_length
    blobs = {}
    for name, length in table:
        if length < 0 or offset + length > len(body):
            raise CacheError(f"blob {name!r} overruns the entry")
        blobs[name] = body[offset:offset + length]
        offset += length
    if offset != len(body) or "cubin" not in blobs:
        raise CacheError("blob table does not match the entry")
    try:
        ptx = blobs["ptx"].decode() if "ptx" in blobs else None
        llir = blobs["llir"].decode() if "llir" in blobs else None
    except UnicodeDecodeError as exc:
        raise CacheError(f"bad text blob: {exc}") from None
    return CacheEntry(blobs["cubin"], document, ptx, llir)


class KernelCache:
    """On-disk kernel cache in ``directory`` (default: ``tsjit.env.cache_dir()``, read at
    each call so ``TSJIT_CACHE_DIR`` changes apply).  ``TSJIT_DISABLE_CACHE`` turns reads and
    writes off; ``TSJIT_ALWAYS_COMPILE`` makes :meth:`get` miss (writes still happen)."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self._directory = None if directory is None else os.fspath(directory)
        self._write_disabled = False

    @property
    def directory(self) -> str:
        return self._directory if self._directory is not None else env.cache_dir()

    def path_for(self, key: str) -> str:
        """Where the entry for ``key`` lives.

        Raises:
            TsjitError: ``key`` is not a lower-case hex digest of 16-128 characters.
        """
        if not isinstance(key, str) or not _KEY_PATTERN.match(key):
            raise TsjitError(f"cache key must be a lower-case hex digest (16-128 chars); got {key!r}")
        return os.path.join(self.directory, key + SUFFIX)

    def get(self, key: str) -> CacheEntry | None:
        """The entry for ``key``, or ``None`` on a miss or any read problem (never raises
        for I/O or corruption; a malformed ``key`` raises :class:`TsjitError`).  An entry whose
        stored key differs (a file copied under another name) or a path that is not a regular
        file is a miss."""
        path = self.path_for(key)
        if env.disable_cache() or env.always_compile():
            return None
        identity = None
        try:
            data, identity = _read_regular_file(path)
            if data is None:
                return None
            entry = decode_entry(data)
        except FileNotFoundError:
            return None
        except CacheError:
            if identity is not None:
                self._remove_if_unchanged(path, identity)
            return None
        except (OSError, ValueError, MemoryError):
            return None
        return entry if entry.metadata.get("cache_key") == key else None

    def put(self, key: str, entry: CacheEntry) -> bool:
        """Store ``entry`` under ``key`` atomically; returns whether it was written.

        Safe with concurrent writers of the same key (processes or threads): each writes
        its own temporary file and ``os.replace``\\ s it; one complete file remains.
        An unwritable directory warns once (per directory, per process) and disables
        writing for this cache object.

        Raises:
            TsjitError: malformed ``key`` or non-JSON metadata (programming errors).
        """
        path = self.path_for(key)
        if env.disable_cache() or self._write_disabled:
            return False
        if not _absent_or_regular(path):
            return False  # a directory or FIFO sits at the entry's path: leave it alone
        metadata = {"created": time.time(), **entry.metadata, "cache_key": key}
        data = encode_entry(CacheEntry(entry.cubin, metadata, entry.ptx, entry.llir))
        directory = os.path.dirname(path)
        temp_path = None
        try:
            os.makedirs(directory, exist_ok=True)
            fd, temp_path = tempfile.mkstemp(dir=directory, prefix="." + key + ".", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp_path, path)
            temp_path = None
            return True
        except OSError as exc:
            self._write_disabled = True
            if directory not in _warned_directories:
                _warned_directories.add(directory)
                warn(f"tsjit kernel cache disabled: cannot write to {directory!r} ({exc}); "
                     f"set TSJIT_CACHE_DIR to a writable directory", RuntimeWarning)
            return False
        finally:
            if temp_path is not None:
                try:
                    os.unlink(temp_path)
                except OSError:
                    pass

    def read_memo(self, name: str) -> dict | None:
        """The JSON object last stored by :meth:`write_memo` under ``name``, or ``None`` (absent,
        unreadable, not a regular file, not JSON, caching disabled)."""
        if env.disable_cache():
            return None
        try:
            data, _ = _read_regular_file(os.path.join(self.directory, f"tsjit-memo-{name}.json"))
            document = json.loads(data.decode()) if data is not None else None
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) else None

    def write_memo(self, name: str, document: dict) -> None:
        """Store a small JSON object under ``name`` (``[a-z0-9-]+``) atomically; failures are ignored
        (a memo only saves work)."""
        path = os.path.join(self.directory, f"tsjit-memo-{name}.json")
        if env.disable_cache() or self._write_disabled or not _MEMO_NAME.match(os.path.basename(path)) \
                or not _absent_or_regular(path):
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, temp_path = tempfile.mkstemp(dir=self.directory, prefix=".tsjit-memo-", suffix=".part")
            with os.fdopen(fd, "w") as handle:
                json.dump(document, handle)
            os.replace(temp_path, path)
        except (OSError, TypeError, ValueError):
            pass

    def info(self) -> dict:
        """``{"directory", "entries", "total_bytes", "enabled"}`` over tsjit's entries only (see the
        module docstring); a missing directory has 0 entries."""
        entries = total = 0
        for path, size in self._own_files(entries_only=True):
            entries += 1
            total += size
        return {"directory": self.directory, "entries": entries, "total_bytes": total,
                "enabled": not (env.disable_cache() or self._write_disabled)}

    def clear(self) -> int:
        """Delete tsjit's entries and its stale temporary files (nothing else in the directory);
        returns the number of files removed."""
        removed = 0
        for path, _ in self._own_files(entries_only=False):
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
        return removed

    def _own_files(self, entries_only: bool):
        """``(path, size)`` of each regular file in the directory that tsjit wrote."""
        directory = self.directory
        try:
            names = os.listdir(directory)
        except OSError:
            return []
        found = []
        now = time.time()
        for name in names:
            is_entry = bool(_ENTRY_NAME.match(name))
            is_memo = not is_entry and bool(_MEMO_NAME.match(name))
            if not is_entry and (entries_only or not (is_memo or _TEMP_NAME.match(name))):
                continue
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if is_memo:
                    found.append((path, info.st_size))
                    continue
                if not is_entry and now - info.st_mtime < STALE_TEMP_SECONDS:
                    continue
                if not _starts_with_magic(path, allow_empty=not is_entry):
                    continue
            except OSError:
                continue
            found.append((path, info.st_size))
        return found

    @staticmethod
    def _remove_if_unchanged(path: str, identity: os.stat_result) -> None:
        """Delete a corrupt entry unless another writer has replaced it since we read it."""
        try:
            now = os.stat(path)
            if (now.st_ino, now.st_dev, now.st_mtime_ns) == (identity.st_ino, identity.st_dev,
                                                            identity.st_mtime_ns):
                os.unlink(path)
        except OSError:
            pass


def _read_regular_file(path: str):
    """``(bytes, stat)`` of ``path``, or ``(None, None)`` when it is not a regular file.  The open
    never blocks (``O_NONBLOCK``: a FIFO does not wait for a writer) and nothing is read from a
    directory, FIFO, socket or device.

    Raises:
        OSError: the file cannot be opened or read (``FileNotFoundError`` when it is absent).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        identity = os.fstat(fd)
        if not stat.S_ISREG(identity.st_mode):
            return None, None
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), identity
    finally:
        os.close(fd)


def _absent_or_regular(path: str) -> bool:
    """False only when something other than a regular file exists at ``path``."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:  # absent, or the directory itself is unusable (the write reports that)
        return True


def _starts_with_magic(path: str, allow_empty: bool) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, len(MAGIC))
    finally:
        os.close(fd)
    return head == MAGIC or (allow_empty and MAGIC.startswith(head))
