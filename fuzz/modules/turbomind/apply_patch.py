#!/usr/bin/env python3
"""apply_patch.py PATCH DIR: applies a unified diff (paths a/... b/..., as `patch -p1`) to the files
under DIR, for a machine without `patch` (a bare CUDA image has python3, not always patch or git).
Strict: each hunk's old text (context and removed lines) must occur where the hunk says, or exactly
once in its file; else nothing is written and the exit status is 1 with one line naming the file and
the hunk."""
import re
import sys


def hunks_by_file(text):
    files, current, hunk = {}, None, None
    for line in text.splitlines(keepends=True):
        if line.startswith("+++ "):
            current = files.setdefault(line[4:].strip().split("\t")[0].split("/", 1)[1], [])
        elif line.startswith("--- "):
            continue
        elif line.startswith("@@"):
            if not re.match(r"@@ -\d+(,\d+)? \+\d+(,\d+)? @@", line) or current is None:
                raise ValueError(f"malformed hunk header {line.strip()!r}")
            hunk = {"header": line.strip(), "old": [], "new": [],
                    "at": int(re.match(r"@@ -\d+(?:,\d+)? \+(\d+)", line).group(1))}
            current.append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+"):
            body = line[1:]
            if line[0] in (" ", "-"):
                hunk["old"].append(body)
            if line[0] in (" ", "+"):
                hunk["new"].append(body)
        elif hunk is not None and line.startswith("\\"):
            continue  # "\ No newline at end of file"
    return files


def main():
    if len(sys.argv) != 3:
        print("usage: apply_patch.py PATCH DIR", file=sys.stderr)
        return 2
    patch, root = sys.argv[1], sys.argv[2]
    try:
        with open(patch) as file:
            files = hunks_by_file(file.read())
    except (OSError, ValueError) as error:
        print(f"{patch}: {error}", file=sys.stderr)
        return 1
    results = {}
    for name, hunks in files.items():
        path = f"{root}/{name}"
        try:
            with open(path) as file:
                text = file.read()
        except OSError as error:
            print(f"{name}: {error.strerror}", file=sys.stderr)
            return 1
        for hunk in hunks:
            old, new = "".join(hunk["old"]), "".join(hunk["new"])
            starts = [m.start() for m in re.finditer(re.escape(old), text)]
            # Where the hunk says (its + line: earlier hunks are applied already), else the one place
            # its text occurs; several places and none where it says is ambiguous.
            at = [s for s in starts if text.count("\n", 0, s) + 1 == hunk["at"]]
            chosen = at or (starts if len(starts) == 1 else [])
            if not chosen:
                print(f"{name}: hunk {hunk['header']} does not apply (its text occurs {len(starts)} times, none at "
                      f"line {hunk['at']})", file=sys.stderr)
                return 1
            text = text[:chosen[0]] + new + text[chosen[0] + len(old):]
        results[path] = text
    for path, text in results.items():
        with open(path, "w") as file:
            file.write(text)
        print(f"patched {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
