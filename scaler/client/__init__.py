"""The client side: Client, futures, serializers, object references and graphs."""
