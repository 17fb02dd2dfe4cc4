#!/usr/bin/env python3
"""Generates Python service classes with genpy, as catkin would for a package's .srv files.

  genpy_srv.py OUTROOT PACKAGE FILE.srv...

writes OUTROOT/PACKAGE/__init__.py and OUTROOT/PACKAGE/srv/ (put OUTROOT on PYTHONPATH);
message dependencies are found in /usr/share/<pkg>/msg, where Debian installs them.
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
    outdir = os.path.join(outroot, package, 'srv')
    os.makedirs(outdir, exist_ok=True)
    rc = genpy.generator.SrvGenerator().generate_messages(package, files, outdir, search)
    genpy.generate_initpy.write_modules(outdir)
    open(os.path.join(outroot, package, '__init__.py'), 'a').close()
    sys.exit(rc)


if __name__ == '__main__':
    main()
