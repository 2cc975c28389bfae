from django.db import migrations

from simdb.django.operations import InstallSimdbFunctions


class Migration(migrations.Migration):
    dependencies = [("posts", "0001_initial")]

    # simdb_hamming(a, b), simdb_blocks(fp), ... for SQL written by hand or by analysts
    operations = [InstallSimdbFunctions()]
