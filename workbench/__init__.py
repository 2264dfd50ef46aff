"""PTX Workbench: write, judge and time hand-written PTX kernels for Hopper and Blackwell."""

__version__ = "0.1.0"
