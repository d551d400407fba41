"""The HLO text parser (`hlo_parser`) and its lexer."""
