"""gail"""
