"""poca"""
