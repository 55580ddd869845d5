"""kueue_es."""
