"""The protocol kit: what every protocol's folder would otherwise write again, kept once.

A protocol (``hitkit/protocols/NAME/``) gives only what is its own and asks the kit for the rest: its
starter study's common lines (:mod:`.starter`), the dashboard's words, score rows and side-by-side
rows (:mod:`.views`), the choices an analysis summary records (:mod:`.summary`), the parts of a
``hitkit plan`` judge plan every judged protocol states alike (:mod:`.judge_plan`), and the task
types' shared steps (:mod:`.task`). The kit names no protocol and imports none.
"""
