"""What a bundle reports: its summary and plots (report.py), several bundles side by side (merge.py),
from the tables alone through each kind's own sections (kinds/)."""
