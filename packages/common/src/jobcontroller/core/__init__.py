"""jobcontroller.core"""
