"""One module per role: its prompt, its output schema, and the call that validates it.

Every role receives `QuestionView`s (never gold rubrics) and wraps untrusted text (questions,
responses) in tagged data blocks that the instructions tell the model not to obey.
"""
