"""Arena (LMArena/FastChat battles): the stats side. Placeholder: the live side's __init__.py, which registers
the protocol, replaces this file at merge."""
