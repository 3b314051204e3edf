"""Crowd recruitment: a campaign's study link for Prolific, MTurk and other URL-parameter
platforms (issue 22, point 3).

`/join/<token>/?PROLIFIC_PID=…&STUDY_ID=…&SESSION_ID=…` creates or resumes a participant: an
annotator account of its own, without a password, in that campaign only. The participant reads
the consent and instructions, then (when the campaign requires it) the qualification, then
rates on the ordinary rating page until their quota, their time limit or the items run out, and
gets the completion code (or, failing the qualification, the screen-out code).

Trust model, the platform's own: whoever holds the link and a participant id acts as that
participant; the platform keeps the link to the people it recruited. Beyond that:
- one account per (campaign, participant id): the same id in two campaigns is two accounts, and
  joining one study never logs into the other's account;
- a returning participant resumes from the same browser (the session names their participant),
  or from another with the same parameters, the platform's session id included where the
  platform has one, so that knowing someone's participant id alone does not take over their
  place once they joined;
- participant ids are stored as given and shown only to the campaign's researchers: the
  account's username is random and is all the participant or other raters ever see.

Modules: `models` (StudyLink, Participant), `links` (settings, rotating and closing),
`joining` (join and resume), `flow` (the one place that says where a participant goes next),
`export` (the payment rows, CSV and API).
"""
