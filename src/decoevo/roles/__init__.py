"""One module per role: its prompt, its output schema, and the call that validates it.

Every role receives `QuestionView`s (never gold rubrics) and seals untrusted text (questions, responses,
rubrics under audit, other roles' rationales, skills) in data blocks that the instructions tell the model
not to obey; verdicts copied from the material are refused (`common.own_verdict`).
"""
