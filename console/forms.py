from django.contrib.auth.forms import AuthenticationForm


class LoginForm(AuthenticationForm):
    """Django's sign-in form in the console's words; its errors (a wrong password, too many
    attempts) are shown as they are."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password didn't match. Please try again.",
    }
