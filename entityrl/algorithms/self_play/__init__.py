"""self_play"""
