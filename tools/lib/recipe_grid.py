"""A grid of recipes over a board: its defconfig with some symbols set to every combination of the values
given (tools/sweep.py --set), each variant a minimal config file of its own."""
import hashlib
import itertools
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def symbol_types():
    """{symbol: (type, siblings)} of the Kconfig tree as tools/make/kconfig.py reads it (which finds kconfiglib,
    or says how to install it): the type 'bool', 'int', 'string' ...; siblings, the other members of the
    symbol's choice (empty outside one). Raises ValueError with its message where it fails."""
    done = subprocess.run([sys.executable, os.path.join("tools", "make", "kconfig.py"), "symbols"], cwd=REPO,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ValueError((done.stderr or done.stdout).strip() or "tools/make/kconfig.py symbols failed")
    types = {}
    for line in done.stdout.splitlines():
        name, kind, *siblings = line.split()
        types[name] = (kind, tuple(siblings[0].split(",")) if siblings else ())
    return types


def parse_sets(texts, types):
    """--set's SYMBOL=V1[,V2...] texts: [(SYMBOL without CONFIG_, [values])]. Raises ValueError with the
    reason for an unknown symbol, a symbol given twice, a missing value or one its type cannot hold."""
    sets = []
    for text in texts:
        name, sep, values = text.partition("=")
        name = name.strip().removeprefix("CONFIG_")
        vals = [v.strip() for v in values.split(",")]
        if not sep or not name or "" in vals:
            raise ValueError(f"--set {text}: wants SYMBOL=V1[,V2...]")
        if name not in types:
            raise ValueError(f"--set {text}: Kconfig has no symbol {name}")
        if name in (s for s, _ in sets):
            raise ValueError(f"--set {name} given twice: give its values in one list")
        if len(set(vals)) != len(vals):
            raise ValueError(f"--set {text}: a value given twice would make two variants of one name")
        kind, siblings = types[name]
        if kind not in ("bool", "int", "string"):
            raise ValueError(f"--set {text}: {name} is a {kind} symbol; --set writes bool, int and string ones")
        for v in vals:
            if (kind == "bool" and v not in ("y", "n")) or (kind == "int" and not re.fullmatch(r"-?\d+", v)) or \
                    (kind == "string" and '"' in v):
                raise ValueError(f"--set {text}: {v} is not a value of {kind} symbol {name}")
            if siblings and v == "n":
                raise ValueError(f"--set {text}: {name} is a choice's member: set the member wanted to y "
                                 f"(one of {', '.join((name,) + siblings)})")
        sets.append((name, vals))
    return sets


def variants(board, sets):
    """[(name, {symbol: value})]: one per combination, in the order the values were given, named
    BOARD+SYMBOL=VALUE+... by the symbols that vary (by every symbol set where none does)."""
    varying = [name for name, vals in sets if len(vals) > 1] or [name for name, _ in sets]
    combos = [dict(c) for c in itertools.product(*[[(name, v) for v in vals] for name, vals in sets])]
    return [(board + "".join(f"+{n}={c[n]}" for n in varying), c) for c in combos]


def fixed(sets):
    """The symbols every variant sets alike, as SYMBOL=VALUE texts (for the header of a grid's table)."""
    return [f"{name}={vals[0]}" for name, vals in sets if len(vals) == 1]


def folder(name):
    """A folder's name for a variant's logs: its name with '=' and other characters a shell or make would read
    made '-', and shortened by a hash where it is longer than a file's name may be."""
    safe = re.sub(r"[^\w.+-]", "-", name)
    return safe if len(safe) <= 120 else safe[:100] + "-" + hashlib.sha1(name.encode()).hexdigest()[:12]


def defconfig(base_text, settings, types):
    """The board's minimal config with each symbol of settings set to its value: the board's own line for it
    dropped, and for a choice's member its siblings' lines, so that the choice takes the member set."""
    dropped = set(settings) | {s for n in settings for s in types[n][1]}
    keep = [line for line in base_text.splitlines()
            if not any(re.match(rf"(# )?CONFIG_{re.escape(n)}(=| is not set)", line) for n in dropped)]
    for name, v in settings.items():
        kind = types[name][0]
        if kind == "bool":
            keep.append(f"CONFIG_{name}=y" if v == "y" else f"# CONFIG_{name} is not set")
        else:
            keep.append(f'CONFIG_{name}="{v}"' if kind == "string" else f"CONFIG_{name}={v}")
    return "\n".join(keep) + "\n"
