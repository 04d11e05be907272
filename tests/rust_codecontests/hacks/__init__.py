"""Hack submissions for the scoring tests: agent code, copied one at a time into a workspace and never imported here
(a package, like every other test folder)."""
