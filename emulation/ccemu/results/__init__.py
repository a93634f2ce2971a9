"""The results bundle: its tables, statistics, fidelity verdict, summary and plots."""
