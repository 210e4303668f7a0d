"""Reports for people: the HTML page, the terminal summary, plots, history timelines."""
