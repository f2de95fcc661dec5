"""The campaign: a folder that keeps one session's item records and transcripts, and everything that reads it.

``record`` is the typed, versioned item record; ``store`` the folder (create, open, append, read, lock);
``manifest`` what the campaign measured; ``rescore`` scores its transcripts again with today's metrics.
"""
