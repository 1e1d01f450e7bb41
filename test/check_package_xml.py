"""
Check package.xml with catkin_pkg, the parser colcon and rosdep use.

Usage: check_package_xml.py PACKAGE_XML. Exits 1, printing why, when the
file does not parse as a valid package manifest or when catkin_pkg warns.
"""

import sys

from catkin_pkg.package import InvalidPackage, parse_package


def main(path):
    """Parse and validate path; return the exit status."""
    warnings = []
    try:
        package = parse_package(path, warnings)
    except InvalidPackage as e:
        print(f'{path}: {e}')
        return 1
    for w in warnings:
        print(f'{path}: {w}')
    if warnings:
        return 1
    print(f'{path}: {package.name} {package.version}, format {package.package_format}: valid')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
