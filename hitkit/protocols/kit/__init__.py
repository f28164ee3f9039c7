"""The protocol kit: what every protocol's folder would otherwise write again, kept once.

A protocol (``hitkit/protocols/NAME/``) gives only what is its own and asks the kit for the rest:
:mod:`.starter` (the lines every ``hitkit init`` starter study shares), :mod:`.views` (the dashboard's
words, score rows and side-by-side rows), :mod:`.task` (a shuffled order's layout, a unit's place and the
first keys of its view, the ids of an exported answer), :mod:`.summary` (what an analysis summary
records of its bootstrap and of repeated rows), :mod:`.judge` (the last columns of a ``judge.csv`` row),
:mod:`.judge_plan` (a share plan's columns and steps; it ranks with the simulation, as every
protocol's ``judge_plan`` does) and :mod:`.report` (a section's optional tables). The kit names no
protocol and imports none.
"""
