"""The S3 bucket a cloud manager owns: wheels it ships, each unit's one-time manifest and its boot report.

Units reach it through presigned URLs only (they need no AWS credentials and no IAM role). Its name is the
`s3_bucket` setting, by default `scaler-<account id>-<region>` (bucket names are global). It is created when
missing, private (public access blocked), with a lifecycle rule that expires what units leave under `units/`
after a day. Layout:

    wheels/<sha256>/<file>.whl          a wheel, uploaded once (the cache of built wheels)
    units/<manager id>/<unit id>/manifest.json   what the unit installs and runs (deleted by the unit at boot)
    units/<manager id>/<unit id>/report.json     the unit's boot report (written by the unit)
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from scaler.worker_manager.aws.client import AwsClients, CloudError, call

logger = logging.getLogger(__name__)

#: Longest a presigned URL may be valid for (S3's limit with long-term keys: 7 days).
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
MISSING = frozenset({"NoSuchKey", "404", "NotFound", "HTTP404"})


class ManagerBucket:
    def __init__(self, clients: AwsClients, name: str = "") -> None:
        self._clients = clients
        self.name = name

    @property
    def _s3(self) -> Any:
        return self._clients["s3"]

    async def resolve(self) -> str:
        """The bucket's name (the default one asks AWS for the account id, once)."""
        if not self.name:
            identity = await call(self._clients["sts"].get_caller_identity)
            self.name = f"scaler-{identity['Account']}-{self._clients.region}"
        return self.name

    async def ensure(self) -> None:
        """The bucket exists (created, private, with its lifecycle rule, when it did not)."""
        await self.resolve()
        try:
            await call(self._s3.head_bucket, Bucket=self.name)
            return
        except CloudError as error:
            if error.code not in MISSING and error.code != "NoSuchBucket":
                raise
        logger.info("creating the S3 bucket %s for what the units are sent", self.name)
        arguments: dict[str, Any] = {"Bucket": self.name}
        if self._clients.region != "us-east-1":
            arguments["CreateBucketConfiguration"] = {"LocationConstraint": self._clients.region}
        try:
            await call(self._s3.create_bucket, **arguments)
        except CloudError as error:
            if error.code != "BucketAlreadyOwnedByYou":
                raise
        block = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                 "RestrictPublicBuckets": True}  # fmt: skip
        await call(self._s3.put_public_access_block, Bucket=self.name, PublicAccessBlockConfiguration=block)
        rule = {"ID": "scaler-units", "Status": "Enabled", "Filter": {"Prefix": "units/"}, "Expiration": {"Days": 1}}
        await call(
            self._s3.put_bucket_lifecycle_configuration, Bucket=self.name, LifecycleConfiguration={"Rules": [rule]}
        )

    async def has(self, key: str) -> bool:
        try:
            await call(self._s3.head_object, Bucket=self.name, Key=key)
            return True
        except CloudError as error:
            if error.code in MISSING:
                return False
            raise

    async def put_file(self, key: str, path: Path) -> None:
        body = await asyncio.to_thread(path.read_bytes)
        await call(self._s3.put_object, Bucket=self.name, Key=key, Body=body)

    async def put_json(self, key: str, value: Any) -> None:
        await call(self._s3.put_object, Bucket=self.name, Key=key, Body=json.dumps(value).encode())

    async def get_json(self, key: str) -> Any:
        """The object's JSON, or None when there is no such object (or bucket)."""
        await self.resolve()
        try:
            response = await call(self._s3.get_object, Bucket=self.name, Key=key)
        except CloudError as error:
            if error.code in MISSING or error.code == "NoSuchBucket":
                return None
            raise
        body = await call(response["Body"].read)
        try:
            return json.loads(body)
        except ValueError:
            return None

    async def delete_prefix(self, prefix: str) -> None:
        await self.resolve()
        try:
            listed = await call(self._s3.list_objects_v2, Bucket=self.name, Prefix=prefix)
        except CloudError as error:
            if error.code == "NoSuchBucket":
                return
            raise
        keys = [{"Key": item["Key"]} for item in listed.get("Contents", [])]
        if keys:
            await call(self._s3.delete_objects, Bucket=self.name, Delete={"Objects": keys, "Quiet": True})

    def presign(self, operation: str, key: str, seconds: float) -> str:
        """A URL that does `operation` (get_object, put_object, delete_object) on `key`, valid for `seconds`."""
        expires = int(min(MAX_PRESIGN_SECONDS, max(60, seconds)))
        url: str = self._s3.generate_presigned_url(operation, Params={"Bucket": self.name, "Key": key},
                                                   ExpiresIn=expires)  # fmt: skip
        return url
