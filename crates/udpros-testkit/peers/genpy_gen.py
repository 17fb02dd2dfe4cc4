#!/usr/bin/env python3
"""Generates Python message or service classes with genpy, as catkin would for a package's
.msg or .srv files.

  genpy_gen.py OUTROOT PACKAGE FILE.msg|FILE.srv...

writes OUTROOT/PACKAGE/__init__.py and OUTROOT/PACKAGE/msg/ or srv/ (put OUTROOT on
PYTHONPATH); dependencies are found in /usr/share/<pkg>/msg, where Debian installs them.
"""
import os
import sys

import genpy.generate_initpy
import genpy.generator


def main():
    outroot, package, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    share = '/usr/share'
    search = {p: [os.path.join(share, p, 'msg')] for p in os.listdir(share)
              if os.path.isdir(os.path.join(share, p, 'msg'))}
    services = all(f.endswith('.srv') for f in files)
    if not services:
        search[package] = sorted({os.path.dirname(os.path.abspath(f)) for f in files})
    kind = 'srv' if services else 'msg'
    generator = genpy.generator.SrvGenerator() if services else genpy.generator.MsgGenerator()
    outdir = os.path.join(outroot, package, kind)
    os.makedirs(outdir, exist_ok=True)
    rc = generator.generate_messages(package, files, outdir, search)
    genpy.generate_initpy.write_modules(outdir)
    open(os.path.join(outroot, package, '__init__.py'), 'a').close()
    sys.exit(rc)


if __name__ == '__main__':
    main()
