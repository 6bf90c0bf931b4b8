"""Recipe formats understood by Loop Console (one module per ``kind``)."""
