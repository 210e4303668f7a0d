"""Jobs, schedules and sensors."""
jobs: list = []
schedules: list = []
sensors: list = []
