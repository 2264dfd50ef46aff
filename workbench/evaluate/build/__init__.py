"""The host side, any machine: the source scan, include and link policy, nvcc, the ABI check, the SASS and
static tier, line info, and the Triton build, ban and trace."""
