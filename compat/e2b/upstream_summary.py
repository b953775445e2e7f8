"""Summarises upstream.sh's JUnit reports: per suite passed / failed /
skipped, then every failure with the first line of its message.
Usage: python3 upstream_summary.py DIR (UPSTREAM_OUT)."""

import pathlib
import sys
import xml.etree.ElementTree as ET


def main(out: str) -> None:
    for report in sorted(pathlib.Path(out).glob("*.xml")):
        passed = failed = skipped = 0
        failures = []
        for case in ET.parse(report).iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if bad is not None:
                failed += 1
                msg = (bad.get("message") or bad.text or "").strip().splitlines()
                failures.append((name, msg[0][:160] if msg else ""))
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
        print(f"{report.stem}: {passed} passed, {failed} failed, {skipped} skipped")
        for name, msg in failures:
            print(f"  FAIL {name}: {msg}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/e2b-upstream")
